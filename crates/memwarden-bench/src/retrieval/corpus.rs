//! Real English sentences from documentation installed on a Debian machine.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Files larger than this are skipped.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Most files read.
pub const MAX_FILES_COUNT: usize = 200_000;
/// Deepest directory level walked.
pub const MAX_DEPTH: usize = 32;
/// Fewest words a sentence must have.
pub const MIN_WORDS: usize = 5;
/// Most words a sentence may have.
pub const MAX_WORDS: usize = 60;

/// Where sentences come from, in this order: licence texts, package documentation (plain
/// text, Markdown, reStructuredText, HTML with tags removed, copyright files), Perl POD, Python
/// docstrings and comments, Vim help, C header comments. Compressed files are skipped.
pub fn default_corpus_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["/usr/share/common-licenses", "/usr/share/doc", "/usr/share/perl", "/usr/share/perl5"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let lib = Path::new("/usr/lib");
    let mut python: Vec<PathBuf> = sorted_children(lib)
        .into_iter()
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("python3")))
        .collect();
    python.sort();
    roots.extend(python);
    roots.push(PathBuf::from("/usr/share/vim"));
    for arch in sorted_children(lib) {
        if arch.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with("-linux-gnu")) {
            roots.push(arch.join("perl"));
        }
    }
    roots.push(PathBuf::from("/usr/include"));
    roots
}

fn sorted_children(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        fs::read_dir(dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    v.sort();
    v
}

/// Sentences found, in a deterministic order (roots in order, files sorted by path), without
/// duplicates (compared case-insensitively).
#[derive(Debug, Clone, Default)]
pub struct Corpus {
    /// The sentences.
    pub sentences: Vec<String>,
    /// Files read.
    pub files_read: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Html,
    Python,
    CHeader,
}

fn kind_of(path: &Path, under_licenses: bool) -> Option<Kind> {
    let name = path.file_name()?.to_str()?;
    if name.ends_with(".gz") || name.ends_with(".bz2") || name.ends_with(".xz") || name.ends_with(".zst") {
        return None;
    }
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "html" | "htm" => Some(Kind::Html),
        "py" => Some(Kind::Python),
        "h" => Some(Kind::CHeader),
        "txt" | "md" | "rst" | "pod" | "pm" | "Debian" => Some(Kind::Plain),
        _ if under_licenses || name == "copyright" => Some(Kind::Plain),
        _ if ["README", "NEWS", "CHANGES", "changelog"].iter().any(|p| name.starts_with(p)) => Some(Kind::Plain),
        _ => None,
    }
}

/// Collects up to `max_sentences` sentences from `roots` (missing roots are skipped).
/// `progress(files_read)` is called every 256 files.
pub fn collect(roots: &[PathBuf], max_sentences: usize, progress: &dyn Fn(usize)) -> Corpus {
    let mut corpus = Corpus::default();
    let mut seen: HashSet<String> = HashSet::new();
    for root in roots {
        let under_licenses = root.ends_with("common-licenses");
        let mut files = Vec::new();
        walk(root, 0, &mut files);
        for file in files {
            if corpus.sentences.len() >= max_sentences || corpus.files_read >= MAX_FILES_COUNT {
                return corpus;
            }
            let Some(kind) = kind_of(&file, under_licenses) else { continue };
            let Ok(meta) = fs::metadata(&file) else { continue };
            if meta.len() > MAX_FILE_BYTES {
                continue;
            }
            let Ok(text) = fs::read_to_string(&file) else { continue };
            corpus.files_read += 1;
            if corpus.files_read % 256 == 0 {
                progress(corpus.files_read);
            }
            for s in sentences_of(&extract(&text, kind)) {
                if corpus.sentences.len() >= max_sentences {
                    break;
                }
                if seen.insert(s.to_lowercase()) {
                    corpus.sentences.push(s);
                }
            }
        }
    }
    corpus
}

/// Regular files under `dir`, depth-first, entries sorted by name; symlinks are not followed.
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > MAX_DEPTH || out.len() >= MAX_FILES_COUNT * 4 {
        return;
    }
    for p in sorted_children(dir) {
        let Ok(meta) = fs::symlink_metadata(&p) else { continue };
        if meta.is_dir() {
            walk(&p, depth + 1, out);
        } else if meta.is_file() {
            out.push(p);
        }
    }
}

/// The prose part of a file.
fn extract(text: &str, kind: Kind) -> String {
    match kind {
        Kind::Plain => text.to_string(),
        Kind::Html => strip_html(text),
        Kind::Python => {
            let mut parts = Vec::new();
            for quote in ["\"\"\"", "'''"] {
                let mut rest = text;
                while let Some(start) = rest.find(quote) {
                    let after = &rest[start + 3..];
                    let Some(end) = after.find(quote) else { break };
                    parts.push(after[..end].to_string());
                    rest = &after[end + 3..];
                }
            }
            // Consecutive comment lines form one paragraph.
            let mut para = Vec::new();
            for line in text.lines() {
                let t = line.trim_start();
                if let Some(c) = t.strip_prefix('#') {
                    para.push(c.trim_start_matches('#').trim().to_string());
                } else if !para.is_empty() {
                    parts.push(para.join(" "));
                    para.clear();
                }
            }
            parts.push(para.join(" "));
            parts.join("\n\n")
        }
        Kind::CHeader => {
            let mut parts = Vec::new();
            let mut rest = text;
            while let Some(start) = rest.find("/*") {
                let after = &rest[start + 2..];
                let Some(end) = after.find("*/") else { break };
                let comment: Vec<&str> =
                    after[..end].lines().map(|l| l.trim().trim_start_matches('*').trim()).collect();
                parts.push(comment.join(" "));
                rest = &after[end + 2..];
            }
            parts.join("\n\n")
        }
    }
}

fn strip_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Splits prose into sentences at `.`, `!` or `?` followed by white space and keeps those that
/// look like English prose: 5–60 words, a capital first letter, final punctuation, mostly
/// letters, mostly ASCII, no code punctuation.
pub fn sentences_of(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for w in words {
        current.push(w);
        if w.ends_with(['.', '!', '?']) {
            let s = current.join(" ");
            if is_prose(&s, current.len()) {
                out.push(s);
            }
            current.clear();
        }
    }
    out
}

fn is_prose(s: &str, word_count: usize) -> bool {
    if !(MIN_WORDS..=MAX_WORDS).contains(&word_count) {
        return false;
    }
    if !s.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
        return false;
    }
    if s.contains(['{', '}', ';', '$', '|', '\\', '`', '=', '_', '@']) || s.contains("->") || s.contains("::") {
        return false;
    }
    let visible: Vec<char> = s.chars().filter(|c| !c.is_whitespace()).collect();
    let letters = visible.iter().filter(|c| c.is_alphabetic()).count();
    let ascii = visible.iter().filter(|c| c.is_ascii()).count();
    letters * 100 >= visible.len() * 75 && ascii * 100 >= visible.len() * 98
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_filters() {
        let text = "This is a fine English sentence. x = 1; y = 2. Too short. \
                    Another sentence follows here with words! let f = |x| x.";
        assert_eq!(
            sentences_of(text),
            vec!["This is a fine English sentence.", "Another sentence follows here with words!"]
        );
    }

    #[test]
    fn python_docstrings_and_comments() {
        let src = "def f():\n    \"\"\"Return the answer to the question.\"\"\"\n    # This comment explains\n    # the next line.\n    return 42\n";
        let prose = extract(src, Kind::Python);
        assert!(prose.contains("Return the answer to the question."));
        assert!(prose.contains("This comment explains the next line."));
    }

    #[test]
    fn html_tags_removed() {
        assert_eq!(strip_html("<p>Fish &amp; chips</p>").trim(), "Fish & chips");
    }
}
