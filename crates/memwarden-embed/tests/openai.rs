//! The OpenAI-compatible client against a tiny HTTP server on 127.0.0.1 (no external network).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memwarden_embed::{Embedder, OpenAiConfig, OpenAiEmbedder};
use serde_json::{Value, json};

/// One request as the server saw it.
#[derive(Debug)]
struct Seen {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Serves `n` connections (one request each) on 127.0.0.1, answering each with
/// `respond(&request) -> (status, body)`; `None` means "never answer" (hold the connection
/// for two seconds, then drop it). Gives up after 20 s without a connection.
fn serve(
    n: usize,
    respond: impl Fn(&Seen) -> Option<(u16, String)> + Send + 'static,
) -> (String, JoinHandle<Vec<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while seen.len() < n {
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                Err(e) => panic!("test server: no connection: {e}"),
            };
            stream.set_nonblocking(false).unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let mut headers = Vec::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                let (k, v) = line.split_once(':').unwrap();
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
            let len: usize = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .map(|(_, v)| v.parse().unwrap())
                .unwrap_or(0);
            let mut body = vec![0u8; len];
            reader.read_exact(&mut body).unwrap();
            let req = Seen {
                request_line: request_line.trim_end().to_string(),
                headers,
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            };
            let mut stream = stream;
            match respond(&req) {
                Some((status, body)) => {
                    let head = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    stream.write_all(head.as_bytes()).unwrap();
                    stream.write_all(body.as_bytes()).unwrap();
                    stream.flush().unwrap();
                }
                None => std::thread::sleep(Duration::from_secs(2)),
            }
            seen.push(req);
        }
        seen
    });
    (base, handle)
}

/// A deterministic 4-dimensional "embedding" of a text (not normalised): [len, 1, 0, 2].
fn fake_vector(text: &str) -> Vec<f32> {
    vec![text.len() as f32, 1.0, 0.0, 2.0]
}

/// An OpenAI-style success body for the request's inputs, listed in reverse order with indexes.
fn success_body(req: &Seen) -> String {
    let inputs = req.body["input"].as_array().unwrap();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .rev()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": fake_vector(t.as_str().unwrap())}))
        .collect();
    json!({"object": "list", "data": data, "model": req.body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}})
        .to_string()
}

fn unit(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
}

#[test]
fn posts_model_and_input_and_reads_embeddings_in_index_order() {
    let (base, server) = serve(1, |r| Some((200, success_body(r))));
    let e = OpenAiEmbedder::new(
        OpenAiConfig::new(format!("{base}/"), "text-embedding-test", 4).with_api_key("sk-test-123"),
    )
    .unwrap();
    assert_eq!(e.dims(), 4);
    assert!(e.name().contains("text-embedding-test"));
    let texts = ["alpha", "be", "gamma delta"];
    let got = e.embed(&texts).unwrap();
    assert_eq!(got.len(), 3);
    for (t, v) in texts.iter().zip(&got) {
        assert!(close(v, &unit(&fake_vector(t))), "{t}: {v:?}");
    }
    let seen = server.join().unwrap();
    assert_eq!(seen[0].request_line, "POST /v1/embeddings HTTP/1.1");
    assert_eq!(seen[0].header("authorization"), Some("Bearer sk-test-123"));
    assert!(seen[0].header("content-type").unwrap().starts_with("application/json"));
    assert_eq!(seen[0].body, json!({"model": "text-embedding-test", "input": ["alpha", "be", "gamma delta"]}));
}

#[test]
fn batches_requests_and_keeps_order() {
    let (base, server) = serve(3, |r| Some((200, success_body(r))));
    let e = OpenAiEmbedder::new(OpenAiConfig::new(base, "m", 4).with_batch_size(2).with_normalize(false)).unwrap();
    let texts = ["a", "bb", "ccc", "dddd", "eeeee"];
    let got = e.embed(&texts).unwrap();
    for (t, v) in texts.iter().zip(&got) {
        assert!(close(v, &fake_vector(t)), "{t}: {v:?}");
    }
    let seen = server.join().unwrap();
    let sizes: Vec<usize> = seen.iter().map(|s| s.body["input"].as_array().unwrap().len()).collect();
    assert_eq!(sizes, [2, 2, 1]);
    assert!(seen.iter().all(|s| s.header("authorization").is_none()));
}

#[test]
fn data_without_index_is_taken_in_order() {
    let (base, server) = serve(1, |_| Some((200, r#"{"data":[{"embedding":[1,0]},{"embedding":[0,3]}]}"#.to_string())));
    let e = OpenAiEmbedder::new(OpenAiConfig::new(base, "m", 2)).unwrap();
    let got = e.embed(&["x", "y"]).unwrap();
    assert_eq!(got, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
    server.join().unwrap();
}

#[test]
fn http_error_carries_status_and_server_message() {
    let (base, server) = serve(1, |_| {
        Some((401, r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#.to_string()))
    });
    let e = OpenAiEmbedder::new(OpenAiConfig::new(base, "m", 4).with_api_key("wrong")).unwrap();
    let err = e.embed(&["x"]).unwrap_err().to_string();
    assert!(err.contains("HTTP 401") && err.contains("Incorrect API key provided"), "{err}");
    server.join().unwrap();
}

#[test]
fn http_error_with_plain_body_is_quoted() {
    let (base, server) = serve(1, |_| Some((503, "model is loading".to_string())));
    let e = OpenAiEmbedder::new(OpenAiConfig::new(base, "m", 4)).unwrap();
    let err = e.embed(&["x"]).unwrap_err().to_string();
    assert!(err.contains("HTTP 503") && err.contains("model is loading"), "{err}");
    server.join().unwrap();
}

#[test]
fn wrong_dimensions_count_or_json_are_errors() {
    let (base, server) = serve(3, |r| {
        Some((
            200,
            match r.body["input"][0].as_str().unwrap() {
                "dims" => r#"{"data":[{"index":0,"embedding":[1,2,3]}]}"#.to_string(),
                "count" => r#"{"data":[]}"#.to_string(),
                _ => "<html>not json</html>".to_string(),
            },
        ))
    });
    let e = OpenAiEmbedder::new(OpenAiConfig::new(base, "m", 4)).unwrap();
    let err = e.embed(&["dims"]).unwrap_err().to_string();
    assert!(err.contains("returned 3 dimensions, configured 4"), "{err}");
    let err = e.embed(&["count"]).unwrap_err().to_string();
    assert!(err.contains("returned 0 embeddings for 1 inputs"), "{err}");
    let err = e.embed(&["json"]).unwrap_err().to_string();
    assert!(err.contains("response is not") && err.contains("not json"), "{err}");
    server.join().unwrap();
}

#[test]
fn slow_server_times_out() {
    let (base, server) = serve(1, |_| None);
    let e = OpenAiEmbedder::new(OpenAiConfig::new(base, "m", 4).with_timeout(Duration::from_millis(300))).unwrap();
    let t = Instant::now();
    let err = e.embed(&["x"]).unwrap_err().to_string();
    assert!(err.contains("timed out after 300ms"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(2), "took {:?}", t.elapsed());
    server.join().unwrap();
}

#[test]
fn refused_connection_is_a_clear_error() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = OpenAiEmbedder::new(OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"), "m", 4)).unwrap();
    let err = e.embed(&["x"]).unwrap_err().to_string();
    assert!(err.contains(&format!("embeddings request to http://127.0.0.1:{port}/v1/embeddings failed")), "{err}");
}
