//! A client for OpenAI-compatible `/embeddings` endpoints.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{EmbedError, Embedder};

/// Largest response body accepted (a batch of 2,048 vectors of 3,072 floats as JSON fits).
const MAX_RESPONSE_BYTES: u64 = 256 * 1024 * 1024;

/// Settings for [`OpenAiEmbedder`]. Build with [`OpenAiConfig::new`] and the `with_*` methods.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// API base URL, e.g. `http://127.0.0.1:8080/v1`; requests go to `{base_url}/embeddings`.
    /// Only `http://` is supported (this build has no TLS stack).
    pub base_url: String,
    /// The `model` field of each request.
    pub model: String,
    /// Output dimensions the server returns for `model`; every returned vector is checked.
    pub dims: usize,
    /// Sent as `Authorization: Bearer {api_key}` when set.
    pub api_key: Option<String>,
    /// Limit for one whole request (connect, send, receive). Default 30 s.
    pub timeout: Duration,
    /// At most this many texts per request (at least 1). Default 64.
    pub batch_size: usize,
    /// L2-normalise the returned vectors (default `true`, matching the local model).
    pub normalize: bool,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("dims", &self.dims)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("batch_size", &self.batch_size)
            .field("normalize", &self.normalize)
            .finish()
    }
}

impl OpenAiConfig {
    /// Settings for `model` at `base_url`, returning `dims`-dimensional vectors; no API key,
    /// 30 s timeout, 64 texts per request, normalised output.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>, dims: usize) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            dims,
            api_key: None,
            timeout: Duration::from_secs(30),
            batch_size: 64,
            normalize: true,
        }
    }

    /// Sets the API key (sent as a bearer token).
    #[must_use]
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// Sets the per-request timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the number of texts per request.
    #[must_use]
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Chooses whether returned vectors are L2-normalised.
    #[must_use]
    pub fn with_normalize(mut self, normalize: bool) -> Self {
        self.normalize = normalize;
        self
    }
}

#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [&'a str],
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

#[derive(Deserialize)]
struct ErrorResponse {
    error: ErrorBody,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorBody {
    Object { message: String },
    Text(String),
}

/// An [`Embedder`] backed by an OpenAI-compatible `POST {base_url}/embeddings` endpoint
/// (OpenAI, llama.cpp's server, vLLM, Ollama's `/v1`, text-embeddings-inference, ...).
///
/// Sends `{"model": ..., "input": [...]}` in batches of [`OpenAiConfig::batch_size`] and reads
/// `data[i].embedding` (ordered by `data[i].index` when the server gives it). Blocking; one
/// request at a time per call; `Send + Sync`.
///
/// ```no_run
/// use memwarden_embed::{Embedder, OpenAiConfig, OpenAiEmbedder};
/// # fn main() -> Result<(), memwarden_embed::EmbedError> {
/// let e = OpenAiEmbedder::new(OpenAiConfig::new("http://127.0.0.1:8080/v1", "all-MiniLM-L6-v2", 384))?;
/// let v = e.embed(&["The cat sits outside"])?;
/// assert_eq!(v[0].len(), 384);
/// # Ok(())
/// # }
/// ```
pub struct OpenAiEmbedder {
    agent: ureq::Agent,
    url: String,
    model: String,
    api_key: Option<String>,
    dims: usize,
    batch_size: usize,
    normalize: bool,
    timeout: Duration,
    name: String,
}

impl fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("dims", &self.dims)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("batch_size", &self.batch_size)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl OpenAiEmbedder {
    /// A client with these settings. Checks them (no request is made): the URL must start with
    /// `http://`, the model name must not be empty, `dims` must be positive.
    pub fn new(config: OpenAiConfig) -> Result<Self, EmbedError> {
        let base = config.base_url.trim().trim_end_matches('/');
        if base.starts_with("https://") {
            return Err(EmbedError(format!(
                "embeddings endpoint {base}: https is not supported by this build (no TLS stack); \
                 use an http:// endpoint such as a local server or a TLS-terminating proxy"
            )));
        }
        if !base.starts_with("http://") || base.len() <= "http://".len() {
            return Err(EmbedError(format!(
                "embeddings endpoint {base:?}: base URL must look like http://HOST[:PORT]/v1"
            )));
        }
        if config.model.trim().is_empty() {
            return Err(EmbedError("embeddings endpoint: model name is empty".to_string()));
        }
        if config.dims == 0 {
            return Err(EmbedError("embeddings endpoint: dims must be positive".to_string()));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Self {
            agent,
            url: format!("{base}/embeddings"),
            name: format!("openai-compatible {} at {base}", config.model),
            model: config.model,
            api_key: config.api_key,
            dims: config.dims,
            batch_size: config.batch_size.max(1),
            normalize: config.normalize,
            timeout: config.timeout,
        })
    }

    /// The full URL requests are sent to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One request for one batch.
    fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let url = &self.url;
        let mut req = self.agent.post(url);
        if let Some(key) = &self.api_key {
            req = req.header("Authorization", format!("Bearer {key}"));
        }
        let mut resp = req.send_json(EmbeddingsRequest { model: &self.model, input: texts }).map_err(|e| match e {
            ureq::Error::Timeout(_) => {
                EmbedError(format!("embeddings request to {url} timed out after {:?}", self.timeout))
            }
            e => EmbedError(format!("embeddings request to {url} failed: {e}")),
        })?;
        let status = resp.status();
        let body = resp.body_mut().with_config().limit(MAX_RESPONSE_BYTES).read_to_vec().map_err(|e| match e {
            ureq::Error::Timeout(_) => {
                EmbedError(format!("embeddings response from {url} timed out after {:?}", self.timeout))
            }
            e => EmbedError(format!("reading the embeddings response from {url}: {e}")),
        })?;
        if !status.is_success() {
            let detail = match serde_json::from_slice::<ErrorResponse>(&body) {
                Ok(ErrorResponse { error: ErrorBody::Object { message } | ErrorBody::Text(message) }) => message,
                Err(_) => snippet(&body),
            };
            return Err(EmbedError(format!("embeddings endpoint {url} answered HTTP {}: {detail}", status.as_u16())));
        }
        let parsed: EmbeddingsResponse = serde_json::from_slice(&body).map_err(|e| {
            EmbedError(format!(
                "embeddings endpoint {url}: response is not {{\"data\": [{{\"embedding\": [...]}}]}} ({e}): {}",
                snippet(&body)
            ))
        })?;
        let n = parsed.data.len();
        if n != texts.len() {
            return Err(EmbedError(format!(
                "embeddings endpoint {url} returned {n} embeddings for {} inputs",
                texts.len()
            )));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
        let indexed = parsed.data.iter().all(|d| d.index.is_some());
        for (pos, item) in parsed.data.into_iter().enumerate() {
            let slot = if indexed { item.index.unwrap_or(pos) } else { pos };
            if slot >= n || out[slot].is_some() {
                return Err(EmbedError(format!("embeddings endpoint {url}: bad or repeated index {slot} in data")));
            }
            if item.embedding.len() != self.dims {
                return Err(EmbedError(format!(
                    "embeddings endpoint {url}: model {} returned {} dimensions, configured {}",
                    self.model,
                    item.embedding.len(),
                    self.dims
                )));
            }
            if item.embedding.iter().any(|x| !x.is_finite()) {
                return Err(EmbedError(format!("embeddings endpoint {url}: non-finite value in embedding {slot}")));
            }
            let mut v = item.embedding;
            if self.normalize {
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if norm > 0.0 {
                    v.iter_mut().for_each(|x| *x /= norm);
                }
            }
            out[slot] = Some(v);
        }
        // Every slot is filled: n items, each to a distinct slot below n.
        Ok(out.into_iter().flatten().collect())
    }
}

/// The start of a response body, for error messages.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_string();
    }
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

impl Embedder for OpenAiEmbedder {
    fn name(&self) -> &str {
        &self.name
    }

    fn dims(&self) -> usize {
        self.dims
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.batch_size) {
            out.extend(self.request(chunk)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_settings_without_network() {
        let https = OpenAiEmbedder::new(OpenAiConfig::new("https://api.example.invalid/v1", "m", 3)).unwrap_err();
        assert!(https.0.contains("https is not supported"), "{https}");
        let bad = OpenAiEmbedder::new(OpenAiConfig::new("localhost:8080", "m", 3)).unwrap_err();
        assert!(bad.0.contains("http://HOST"), "{bad}");
        let no_model = OpenAiEmbedder::new(OpenAiConfig::new("http://127.0.0.1:1/v1", " ", 3)).unwrap_err();
        assert!(no_model.0.contains("model name is empty"), "{no_model}");
        let no_dims = OpenAiEmbedder::new(OpenAiConfig::new("http://127.0.0.1:1/v1", "m", 0)).unwrap_err();
        assert!(no_dims.0.contains("dims"), "{no_dims}");
        let ok = OpenAiEmbedder::new(OpenAiConfig::new("http://127.0.0.1:1/v1/", "m", 3)).unwrap();
        assert_eq!(ok.url(), "http://127.0.0.1:1/v1/embeddings");
        assert!(ok.embed(&[]).unwrap().is_empty());
    }

    #[test]
    fn debug_redacts_the_api_key() {
        let c = OpenAiConfig::new("http://127.0.0.1:1/v1", "m", 3).with_api_key("sk-secret");
        assert!(!format!("{c:?}").contains("sk-secret"));
        let e = OpenAiEmbedder::new(c).unwrap();
        assert!(!format!("{e:?}").contains("sk-secret"));
    }

    #[test]
    fn snippet_is_short_and_char_safe() {
        let long = "é".repeat(1000);
        let s = snippet(long.as_bytes());
        assert!(s.chars().count() <= 303);
        assert_eq!(snippet(b"  "), "(empty body)");
    }
}
