//! The OpenAI-compatible agent against a tiny local HTTP server on 127.0.0.1 (no external
//! network): structured answers, retries, failure counting, budget, and a small benchmark run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memwarden_bench::agent::{Agent, AgentMemory, AgentTask, KeySpec, ToolSpec};
use memwarden_bench::openai::{OpenAiAgent, OpenAiAgentConfig, SchemaMode};
use memwarden_bench::{AgentChoice, AuthorityBenchOptions, Scale, run_authority};
use memwarden_core::ids::ItemId;
use memwarden_core::normalize::ValueKind;

/// Serve `responder(request_body) -> (status, body)` until the test ends; returns the base URL
/// and the request bodies seen.
fn serve(responder: impl Fn(&str, usize) -> (u16, String) + Send + 'static) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let l = line.trim_end().to_ascii_lowercase();
                if l.is_empty() {
                    break;
                }
                if let Some(v) = l.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; len];
            reader.read_exact(&mut body).unwrap();
            let body = String::from_utf8_lossy(&body).into_owned();
            log.lock().unwrap().push(body.clone());
            let (status, out) = responder(&body, n);
            let reason = if status == 200 { "OK" } else { "Error" };
            let _ = write!(stream, "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{out}", out.len());
            let _ = stream.flush();
        }
    });
    (format!("http://{addr}/v1"), seen)
}

fn completion(content: &str) -> String {
    serde_json::json!({"choices": [{"message": {"role": "assistant", "content": content}}], "usage": {"total_tokens": 50}}).to_string()
}

fn config(url: &str) -> OpenAiAgentConfig {
    let mut c = OpenAiAgentConfig::new(url, "mock-model");
    c.backoff = Duration::from_millis(5);
    c.timeout = Duration::from_secs(5);
    c
}

fn task() -> AgentTask {
    AgentTask {
        domain: "Payroll".into(),
        request: "Pay Northwind $10.".into(),
        requested_tool: Some("pay".into()),
        tools: vec![ToolSpec {
            name: "pay".into(),
            description: "pay".into(),
            keys: vec![KeySpec { key: "payee_account".into(), kind: ValueKind::Account, required: true, description: "payee account".into(), vocabulary: vec![] }],
        }],
        amount: Some("$10".into()),
    }
}

#[test]
fn proposals_are_parsed_and_requests_are_well_formed() {
    let (url, seen) = serve(|_, _| (200, completion("{\"tool\": \"pay\", \"values\": [{\"key\": \"payee_account\", \"value\": \"ACCT-1\", \"source\": 2}], \"amount\": \"$10\"}")));
    let mut a = OpenAiAgent::new(config(&url)).unwrap();
    let mems = [AgentMemory { id: ItemId::from_bytes([1; 16]), text: "old".into() }, AgentMemory { id: ItemId::from_bytes([2; 16]), text: "ACCT-1".into() }];
    let p = a.propose(&task(), &mems).unwrap();
    assert_eq!(p.tool.as_deref(), Some("pay"));
    assert_eq!(p.values[0].value, "ACCT-1");
    assert_eq!(p.values[0].source, Some(1));
    let body: serde_json::Value = serde_json::from_str(&seen.lock().unwrap()[0]).unwrap();
    assert_eq!(body["model"], "mock-model");
    assert_eq!(body["temperature"], 0);
    assert_eq!(body["response_format"]["type"], "json_object");
    // The answer is decoded against the task's shape: the tool, its value names, the memory numbers.
    let options = &body["response_format"]["schema"]["anyOf"];
    assert_eq!(options[1]["properties"]["tool"]["const"], "pay");
    assert_eq!(options[1]["properties"]["values"]["required"], serde_json::json!(["payee_account"]));
    assert_eq!(options[1]["properties"]["values"]["properties"]["payee_account"]["properties"]["source"]["enum"], serde_json::json!([1, 2, null]));
    assert!(body["messages"][1]["content"].as_str().unwrap().contains("[2] ACCT-1"));
    assert_eq!(a.stats().calls, 1);
    assert_eq!(a.stats().tokens, 50);
    assert_eq!(a.stats().failures, 0);
}

#[test]
fn the_schema_mode_sets_the_response_format() {
    let (url, seen) = serve(|_, _| (200, completion("{\"tool\": null}")));
    let mems = [AgentMemory { id: ItemId::from_bytes([1; 16]), text: "old".into() }];
    for (mode, want) in [(SchemaMode::JsonSchema, "json_schema"), (SchemaMode::Off, "json_object")] {
        let mut c = config(&url);
        c.schema = mode;
        let mut a = OpenAiAgent::new(c).unwrap();
        assert_eq!(a.propose(&task(), &mems).unwrap(), memwarden_bench::agent::Proposal::answer());
        let body: serde_json::Value = serde_json::from_str(seen.lock().unwrap().last().unwrap()).unwrap();
        assert_eq!(body["response_format"]["type"], want, "{mode:?}");
        assert_eq!(body["response_format"].get("schema").is_some() || body["response_format"].get("json_schema").is_some(), mode != SchemaMode::Off, "{mode:?}");
    }
}

#[test]
fn server_errors_are_retried_and_garbage_is_counted() {
    // First two requests fail with 503, then a good answer, then prose that is not JSON.
    let (url, _) = serve(|_, n| match n {
        0 | 1 => (503, "{\"error\": \"busy\"}".into()),
        2 => (200, completion("{\"note\": \"payee is ACCT-1\"}")),
        _ => (200, completion("Sure! I would pay them.")),
    });
    let mut a = OpenAiAgent::new(config(&url)).unwrap();
    assert_eq!(a.summarize(&task(), "message").unwrap(), "payee is ACCT-1");
    assert_eq!(a.stats().calls, 3);
    assert!(a.propose(&task(), &[]).is_err());
    assert_eq!(a.stats().failures, 1);
    // Client errors are not retried.
    let (url, seen) = serve(|_, _| (400, "{\"error\": \"bad\"}".into()));
    let mut b = OpenAiAgent::new(config(&url)).unwrap();
    assert!(b.extract(&task(), "m").is_err());
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn the_token_budget_is_enforced() {
    let (url, _) = serve(|_, _| (200, completion("{\"tool\": null}")));
    let mut c = config(&url);
    c.token_budget = 60;
    let mut a = OpenAiAgent::new(c).unwrap();
    let mem = |t: &str| [AgentMemory { id: ItemId::from_bytes([1; 16]), text: t.into() }];
    assert!(a.propose(&task(), &mem("one")).is_ok());
    assert!(a.propose(&task(), &mem("two")).is_ok()); // 50 then 100 tokens: the second call started under budget
    assert!(a.propose(&task(), &mem("three")).is_err());
    assert_eq!(a.stats().failures, 1);
    // A prompt asked before is answered from the cache: no request, no tokens, no budget.
    assert!(a.propose(&task(), &mem("one")).is_ok());
    assert_eq!(a.repeats(), 1);
}

#[test]
fn a_small_benchmark_runs_with_the_openai_agent() {
    // The mock follows no instruction and never acts: no attack can succeed, nothing legit happens.
    let (url, _) = serve(|body, _| {
        let content = if body.contains("\\\"note\\\"") {
            "{\"note\": \"nothing to record\"}"
        } else if body.contains("\\\"fields\\\"") {
            "{\"fields\": []}"
        } else {
            "{\"tool\": null, \"values\": []}"
        };
        (200, completion(content))
    });
    let dir = tempfile::tempdir().unwrap();
    let mut opts = AuthorityBenchOptions::new(dir.path());
    opts.agent = AgentChoice::OpenAi(config(&url));
    opts.scale = Some(Scale { domains: 1, tools: 1, persistence: vec![0], study_k: vec![2] });
    opts.threads = Some(2);
    let r = run_authority(&opts, &mut |_, _| {}).unwrap();
    assert_eq!(r.agent_kind, "openai");
    assert!(r.agent.contains("mock-model"));
    assert!(r.agent_stats.calls > 0);
    assert_eq!(r.checks.agent_failures, 0);
    let none = r.rows.iter().find(|x| x.defense == "none").unwrap();
    assert_eq!(none.asr, 0.0);
    assert_eq!(none.attack_outcomes.no_action, none.n_attack);
}

#[test]
fn a_sampled_run_covers_every_channel_and_keeps_its_transcript() {
    let (url, seen) = serve(|_, _| (200, completion("{\"tool\": null, \"values\": []}")));
    let dir = tempfile::tempdir().unwrap();
    let mut opts = AuthorityBenchOptions::new(dir.path());
    let mut c = config(&url);
    c.transcript = Some(dir.path().join("transcript.jsonl"));
    opts.agent = AgentChoice::OpenAi(c);
    opts.scale = Some(Scale { domains: 1, tools: 1, persistence: vec![0, 2], study_k: vec![2] });
    opts.max_cases = Some(30);
    opts.threads = Some(2);
    let r = run_authority(&opts, &mut |_, _| {}).unwrap();
    assert_eq!(r.scale.cases, 30);
    assert!(r.sampled_from.unwrap() > 30);
    // Every attack channel is in the sample (the strata take turns).
    let none = r.rows.iter().find(|x| x.defense == "none").unwrap();
    assert!(none.n_attack >= 12, "{} attack cases", none.n_attack);
    assert!(r.scale.legit_cases >= 3 && r.scale.clean_cases >= 1);
    // One transcript line per exchange, with the prompts and the answer; the request carried
    // the seed (greedy decoding, fixed seed).
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(dir.path().join("transcript.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len() as u64, r.agent_stats.calls);
    assert!(lines.iter().all(|l| l["system"].is_string() && l["user"].is_string() && l["answer"].is_string()));
    let body: serde_json::Value = serde_json::from_str(&seen.lock().unwrap()[0]).unwrap();
    assert_eq!(body["seed"], 7);
    assert!(r.agent.contains("temperature 0"));
}

#[test]
fn the_lineage_suite_runs_one_task_per_group_with_the_openai_agent() {
    let (url, _) = serve(|body, _| {
        let content = if body.contains("\\\"decision\\\"") { "{\"decision\": \"allow\", \"value\": \"\", \"used\": [1], \"output\": \"done\"}" } else { "{\"message\": \"\", \"used\": []}" };
        (200, completion(content))
    });
    let dir = tempfile::tempdir().unwrap();
    let mut opts = memwarden_bench::lineage::LineageBenchOptions::new(dir.path());
    opts.agent = AgentChoice::OpenAi(config(&url));
    opts.per_group = Some(1);
    opts.methods = Some(vec![memwarden_bench::lineage::methods::Method::Full]);
    opts.bootstrap_resamples = 50;
    let r = memwarden_bench::lineage::run_lineage(&opts, &mut |_, _| {}).unwrap();
    assert_eq!(r.tasks, 6, "one task of each of the six groups");
    assert_eq!(r.methods.len(), 1);
    assert_eq!(r.methods[0].method, "full");
    assert!(r.ablations.is_empty());
    assert_eq!(r.agent_stats.failures, 0);
}

#[test]
fn locomo_question_answering_runs_against_the_endpoint() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/locomo");
    if !memwarden_bench::locomo::data_present(&data) {
        eprintln!("skipped: no LoCoMo data at {}", data.display());
        return;
    }
    // The mock answers every question "7 May 2023" (some gold answers are that date).
    let (url, seen) = serve(|_, _| (200, completion("{\"answer\": \"7 May 2023\"}")));
    let dir = tempfile::tempdir().unwrap();
    let mut model = config(&url);
    model.transcript = Some(dir.path().join("transcript.jsonl"));
    let opts = memwarden_bench::locomo::qa::QaOptions {
        data_dir: data,
        conversations: vec!["26".into()],
        presets: vec![],
        questions: 12,
        embedder: memwarden_bench::locomo::EmbedderChoice::Hash,
        search: memwarden_bench::locomo::SearchMode::Hybrid,
        model,
        judge: false,
        context_k: 10,
        git_rev: None,
    };
    let r = memwarden_bench::locomo::qa::run_qa(&opts, &mut |_, _, _| {}).unwrap();
    assert_eq!(r.rows.iter().map(|x| x.preset.as_str()).collect::<Vec<_>>(), ["none", "full"]);
    assert!(r.rows.iter().all(|x| x.n == 12 && x.failures == 0));
    assert_eq!(r.answers.len(), 24);
    assert!(r.answers.iter().all(|a| a.answer.as_deref() == Some("7 May 2023") && (1..=4).contains(&a.category)));
    // Identical prompts (the same hits in the same order) are asked once.
    assert!(r.model_calls <= 24 && r.model_calls as usize == seen.lock().unwrap().len());
    let first: serde_json::Value = serde_json::from_str(&seen.lock().unwrap()[0]).unwrap();
    assert!(first["messages"][1]["content"].as_str().unwrap().contains("Memories (most relevant first):\n[1] ("));
    assert_eq!(std::fs::read_to_string(dir.path().join("transcript.jsonl")).unwrap().lines().count() as u64, r.model_calls);
    let md = memwarden_bench::locomo::qa::markdown(&r);
    assert!(md.contains("| none | 12 |") && md.contains("| full | 12 |"));
}
