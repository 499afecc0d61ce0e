//! Property tests: random sequences of write / derive / tool call / attest / grant / decide are
//! driven through the real authority gate and through a small reference model of the rules
//! (written from the specification, sharing no code with the gate), and must agree.
//!
//! Asserted on every step:
//! * labels equal the model's, and never rise through derivation or tool echo (a tool output the
//!   tool did not vouch for is at most its caller's label);
//! * a value is allowed only with positive support: a trusted user memory carrying it exactly,
//!   one trusted principal carrying or attesting it exactly when nothing untrusted pushes it,
//!   trusted principals of k independent domains when something does (issue 34.1: support in
//!   proportion to the push), an earlier elevation, or a matching, unused,
//!   unexpired grant; a suspicious surface only with a grant for its exact form;
//! * grants are single use.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use ed25519_dalek::SigningKey;
use memwarden_core::authority::grant::{Grant, SignedGrant};
use memwarden_core::prelude::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};

const K: usize = 2;

/// Principals: (id, kind, domain, allow_listed). Index is used by the generator.
const PRINCIPALS: &[(&str, PrincipalKind, Option<&str>, bool)] = &[
    ("u1", PrincipalKind::User, None, false),
    ("a1", PrincipalKind::Agent, None, false),
    ("a2", PrincipalKind::Agent, None, false),
    ("s1", PrincipalKind::Source, Some("evil.example"), false),
    ("s2", PrincipalKind::Source, Some("evil.example"), false),
    ("t1", PrincipalKind::Tool, Some("reg-a.example"), true),
    ("t2", PrincipalKind::Tool, Some("reg-b.example"), true),
    ("t3", PrincipalKind::Tool, Some("reg-a.example"), true),
    ("t4", PrincipalKind::Tool, Some("unlisted.example"), false),
];
const AGENTS: &[usize] = &[1, 2];
const TOOLS: &[usize] = &[5, 6, 7, 8];

/// Values: the model knows them by index; the texts use several surface forms of each.
const SURFACES: &[&[&str]] = &[
    &["ACCT-1001", "acct 1001", "АССТ-1001"],
    &["ACCT-2002", "acct_2002", "ＡＣＣＴ２００２"],
    &["ACCT-3003", "Acct.3003", "acct\u{200B}3003"],
];
const AMOUNTS: &[&str] = &["$150", "150.00 USD", "$1,500"];
const AMOUNT_CLASS: &[usize] = &[0, 0, 1];

// ---------------------------------------------------------------- the reference model

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Lvl {
    U,
    A,
    T,
}

fn principal_level(i: usize) -> Lvl {
    match PRINCIPALS[i].1 {
        PrincipalKind::User => Lvl::T,
        PrincipalKind::Agent => Lvl::A,
        PrincipalKind::Tool if PRINCIPALS[i].3 => Lvl::T,
        _ => Lvl::U,
    }
}

#[derive(Clone, Debug)]
struct MItem {
    level: Lvl,
    writer: usize,
    /// (value, exact class of the surface it is written in).
    value: Option<(usize, usize)>,
}

/// The exact class of a surface: the first two surfaces of each value are one exact form (case
/// and separators), the third (look-alikes, full width, zero width) is its own, and suspicious.
fn exact_class(surface: usize) -> usize {
    usize::from(surface == 2)
}

#[derive(Clone, Debug)]
struct MGrant {
    value: (usize, usize),
    amount_class: usize,
    tool_ok: bool,
    expires_ms: u64,
    used: bool,
}

#[derive(Default)]
struct Model {
    items: Vec<MItem>,
    attest: Vec<(usize, (usize, usize))>, // (principal, (value, exact class))
    elevated: BTreeSet<(usize, usize)>,
    grants: Vec<MGrant>,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum MDecision {
    Allow,
    Ask,
    Refuse,
}

impl Model {
    #[allow(clippy::too_many_arguments)]
    fn decide(&mut self, now_ms: u64, value: usize, surface: usize, amount_class: usize, context: &[usize], sources: &[usize], grant: Option<usize>) -> MDecision {
        let exact = (value, exact_class(surface));
        let cited: BTreeSet<usize> = context.iter().chain(sources).copied().collect();
        // U: untrusted cited items carrying the value (any surface), plus untrusted declared sources.
        let pushers: BTreeSet<usize> = cited
            .iter()
            .copied()
            .filter(|&i| self.items[i].value.map(|v| v.0) == Some(value) || sources.contains(&i))
            .filter(|&i| self.items[i].level == Lvl::U)
            .collect();
        let pusher_writers: BTreeSet<usize> = pushers.iter().map(|&i| self.items[i].writer).collect();
        let domain = |p: usize| PRINCIPALS[p].2.map(str::to_owned).unwrap_or_else(|| format!("p{p}"));
        let exact_trusted: Vec<usize> =
            cited.iter().copied().filter(|&i| self.items[i].value == Some(exact) && self.items[i].level == Lvl::T && !pusher_writers.contains(&self.items[i].writer)).collect();
        let user_statement = exact_trusted.iter().any(|&i| PRINCIPALS[self.items[i].writer].1 == PrincipalKind::User);
        let mut domains: BTreeSet<String> = exact_trusted.iter().filter(|&&i| PRINCIPALS[self.items[i].writer].1 != PrincipalKind::User).map(|&i| domain(self.items[i].writer)).collect();
        domains.extend(self.attest.iter().filter(|(p, v)| *v == exact && principal_level(*p) == Lvl::T && !pusher_writers.contains(p)).map(|(p, _)| domain(*p)));
        let pushed = !pushers.is_empty();
        let earlier = self.elevated.contains(&exact);
        let corroborated = pushed && domains.len() >= K;
        let user_attested = self.attest.iter().any(|(p, v)| *v == exact && PRINCIPALS[*p].1 == PrincipalKind::User && principal_level(*p) == Lvl::T && !pusher_writers.contains(p));
        let by_principals = if pushed { corroborated } else { !domains.is_empty() || user_attested };
        let suspicious = exact_class(surface) == 1;
        if !suspicious && (user_statement || earlier || by_principals) {
            if corroborated {
                self.elevated.insert(exact);
            }
            return MDecision::Allow;
        }
        match grant {
            None => MDecision::Ask,
            Some(g) => {
                let gr = &mut self.grants[g];
                if !gr.used && now_ms <= gr.expires_ms && gr.tool_ok && gr.amount_class == amount_class && gr.value == exact {
                    gr.used = true;
                    MDecision::Allow
                } else {
                    MDecision::Refuse
                }
            }
        }
    }
}

// ---------------------------------------------------------------- operations

#[derive(Clone, Debug)]
enum Op {
    Write { writer: usize, value: usize, surface: usize, parents: Vec<usize> },
    Derive { agent: usize, parents: Vec<usize>, value: Option<(usize, usize)> },
    Tool { caller: usize, tool: usize, vouched: bool, value: usize, surface: usize, inputs: Vec<usize>, source: Option<usize> },
    Attest { principal: usize, value: usize, surface: usize },
    Grant { value: usize, amount: usize, tool_ok: bool, expired: bool },
    Decide { value: usize, surface: usize, amount: usize, context: Vec<usize>, sources: Vec<usize>, grant: Option<usize> },
}

fn op() -> impl Strategy<Value = Op> {
    let idx = || prop::collection::vec(0usize..64, 0..3);
    prop_oneof![
        3 => (0..PRINCIPALS.len(), 0..SURFACES.len(), 0..3usize, idx()).prop_map(|(writer, value, surface, parents)| Op::Write { writer, value, surface, parents }),
        2 => (0..AGENTS.len(), prop::collection::vec(0usize..64, 1..3), prop::option::of((0..SURFACES.len(), 0..3usize)))
            .prop_map(|(a, parents, value)| Op::Derive { agent: AGENTS[a], parents, value }),
        2 => (0..AGENTS.len(), 0..TOOLS.len(), prop::bool::ANY, 0..SURFACES.len(), 0..3usize, idx(), prop::option::of(0usize..64))
            .prop_map(|(c, t, vouched, value, surface, inputs, source)| Op::Tool { caller: AGENTS[c], tool: TOOLS[t], vouched, value, surface, inputs, source }),
        4 => (0..PRINCIPALS.len(), 0..SURFACES.len(), 0..3usize).prop_map(|(principal, value, surface)| Op::Attest { principal, value, surface }),
        1 => (0..SURFACES.len(), 0..AMOUNTS.len(), prop::bool::weighted(0.8), prop::bool::weighted(0.15))
            .prop_map(|(value, amount, tool_ok, expired)| Op::Grant { value, amount, tool_ok, expired }),
        4 => (0..AGENTS.len(), 0..SURFACES.len(), 0..3usize, 0..AMOUNTS.len(), prop::collection::vec(0usize..64, 0..4), prop::collection::vec(0usize..64, 0..2), prop::option::of(0usize..8))
            .prop_map(|(_agent, value, surface, amount, context, sources, grant)| Op::Decide { value, surface, amount, context, sources, grant }),
    ]
}

// ---------------------------------------------------------------- the harness over the real gate

struct Real {
    gate: Authority,
    tenant: TenantId,
    principals: Vec<Principal>,
    items: Vec<MemoryItem>,
    attestations: Vec<Attestation>,
    elevations: Vec<Elevation>,
    grants: Vec<SignedGrant>,
    used: BTreeSet<[u8; 16]>,
    user_key: SigningKey,
    now: u64,
    next_id: u8,
}

impl Real {
    fn new() -> Self {
        let tenant = TenantId::new("t").unwrap();
        let user_key = SigningKey::from_bytes(&[9; 32]);
        let principals = PRINCIPALS
            .iter()
            .map(|(id, kind, domain, allow)| Principal {
                id: PrincipalId::new(id).unwrap(),
                tenant: tenant.clone(),
                kind: *kind,
                domain: domain.map(|d| Domain::new(d).unwrap()),
                allow_listed: *allow,
                public_key: (*kind == PrincipalKind::User).then(|| user_key.verifying_key().to_bytes()), action: None,
            })
            .collect();
        Self {
            gate: Authority::new(AuthorityConfig::default()),
            tenant,
            principals,
            items: Vec::new(),
            attestations: Vec::new(),
            elevations: Vec::new(),
            grants: Vec::new(),
            used: BTreeSet::new(),
            user_key,
            now: 1_000_000,
            next_id: 0,
        }
    }
    fn id(&mut self) -> ItemId {
        self.next_id = self.next_id.wrapping_add(1);
        let mut b = [0u8; 16];
        b[0] = self.next_id;
        b[1] = (self.items.len() >> 8) as u8;
        b[2] = self.items.len() as u8;
        ItemId::from_bytes(b)
    }
}

fn ns() -> Namespace {
    Namespace::new("n").unwrap()
}

fn run(ops: Vec<Op>) {
    let mut model = Model::default();
    let mut real = Real::new();
    for op in ops {
        real.now += 1000;
        let n = model.items.len();
        // Map generated indices onto existing items (or drop them when there are none).
        let pick = |v: &[usize]| -> Vec<usize> {
            let mut out: Vec<usize> = if n == 0 { vec![] } else { v.iter().map(|i| i % n).collect() };
            out.sort();
            out.dedup();
            out
        };
        match op {
            Op::Write { writer, value, surface, parents } => {
                let parents = pick(&parents);
                let text = format!("please pay {}", SURFACES[value][surface]);
                let mut req = WriteRequest::new(ns(), text, default_route(real.principals[writer].kind));
                req.parents = parents.iter().map(|&i| ParentRef { id: real.items[i].id(), kind: EdgeKind::DerivedFrom }).collect();
                req.metadata.insert("trusted".into(), "true".into()); // a body claim: must be ignored
                let id = real.id();
                let refs: Vec<&MemoryItem> = parents.iter().map(|&i| &real.items[i]).collect();
                let w = real.gate.admit_write(&real.principals[writer], &real.tenant, req, &refs, id, real.now).unwrap();
                let level = parents.iter().map(|&i| model.items[i].level).chain([principal_level(writer)]).min().unwrap();
                for &p in &parents {
                    assert!(w.item().label() <= real.items[p].label(), "label rose through derivation");
                }
                let item = w.item().clone();
                model.items.push(MItem { level, writer, value: Some((value, exact_class(surface))) });
                real.items.push(item);
            }
            Op::Derive { agent, parents, value } => {
                let parents = pick(&parents);
                if parents.is_empty() {
                    continue;
                }
                let text = match value {
                    Some((v, s)) => format!("summary: the account is {}", SURFACES[v][s]),
                    None => "summary: nothing specific".to_owned(),
                };
                let mut req = WriteRequest::new(ns(), text, Route::Summary);
                req.parents = parents.iter().map(|&i| ParentRef { id: real.items[i].id(), kind: EdgeKind::SummarizedFrom }).collect();
                let id = real.id();
                let refs: Vec<&MemoryItem> = parents.iter().map(|&i| &real.items[i]).collect();
                let w = real.gate.admit_write(&real.principals[agent], &real.tenant, req, &refs, id, real.now).unwrap();
                let level = parents.iter().map(|&i| model.items[i].level).chain([Lvl::A]).min().unwrap();
                for &p in &parents {
                    assert!(w.item().label() <= real.items[p].label(), "label rose through summary");
                }
                let item = w.item().clone();
                model.items.push(MItem { level, writer: agent, value: value.map(|(v, s)| (v, exact_class(s))) });
                real.items.push(item);
            }
            Op::Tool { caller, tool, vouched, value, surface, inputs, source } => {
                let inputs = pick(&inputs);
                // A declared source is only used when it really carries the value.
                let source = source.and_then(|s| if n == 0 { None } else { Some(s % n) }).filter(|&s| model.items[s].value.map(|v| v.0) == Some(value));
                let args = vec![ToolArg {
                    key: "acct".into(),
                    value: SURFACES[value][surface].into(),
                    kind: ValueKind::Account,
                    sources: source.map(|s| vec![real.items[s].id()]).unwrap_or_default(),
                }];
                let id = real.id();
                let input_refs: Vec<&MemoryItem> = inputs.iter().map(|&i| &real.items[i]).collect();
                let src_refs: Vec<&MemoryItem> = source.iter().map(|&i| &real.items[i]).collect();
                let out = format!("tool output: account {}", SURFACES[value][(surface + 1) % 3]);
                let w = real
                    .gate
                    .admit_tool_output(
                        &real.principals[caller],
                        &Observed::clean(),
                        &real.principals[tool],
                        &Observed::clean(),
                        if vouched { Vouch::Signature } else { Vouch::CallerReported },
                        &args,
                        &src_refs,
                        &input_refs,
                        &real.tenant,
                        ns(),
                        out,
                        id,
                        real.now,
                    )
                    .unwrap();
                // Model: tool level, every input, and the argument: its sources' level when declared,
                // else the caller's; inputs carrying the value also taint it (already in the meet).
                let arg_level = match source {
                    Some(s) => model.items[s].level,
                    None => principal_level(caller),
                };
                // A caller-reported output is at most its caller.
                let caller_cap = if vouched { Lvl::T } else { principal_level(caller) };
                let level = inputs.iter().map(|&i| model.items[i].level).chain([principal_level(tool), arg_level, caller_cap]).min().unwrap();
                for &i in &inputs {
                    assert!(w.item().label() <= real.items[i].label(), "label rose through tool echo");
                }
                let item = w.item().clone();
                // Whose claim it is: the tool's when it vouched (or wrote it itself), else the
                // caller's — support, independence and self-corroboration count that principal.
                let voucher = if vouched || caller == tool { tool } else { caller };
                assert_eq!(item.voucher(), &real.principals[voucher].id);
                model.items.push(MItem { level, writer: voucher, value: Some((value, exact_class((surface + 1) % 3))) });
                real.items.push(item);
            }
            Op::Attest { principal, value, surface } => {
                let a = real.gate.admit_attestation(&real.principals[principal], &Observed::clean(), "acct", SURFACES[value][surface], ValueKind::Account, &[], real.now).unwrap();
                real.attestations.push(a.attestation().clone());
                model.attest.push((principal, (value, exact_class(surface))));
            }
            Op::Grant { value, amount, tool_ok, expired } => {
                let mut nonce = [0u8; 16];
                nonce[0] = real.grants.len() as u8;
                nonce[1] = 0xA5;
                let issued = if expired { real.now - 20_000 } else { real.now };
                let g = Grant {
                    tenant: real.tenant.clone(),
                    store: "store-1".into(),
                    user: PrincipalId::new("u1").unwrap(),
                    tool: if tool_ok { "pay".into() } else { "wire".into() },
                    key: "acct".into(),
                    value: NormValue::new(ValueKind::Account, SURFACES[value][0]).unwrap(),
                    amount: Some(NormValue::new(ValueKind::Amount, AMOUNTS[amount]).unwrap().canonical),
                    nonce,
                    issued_ms: issued,
                    expires_ms: issued + 10_000,
                }
                .sign(&real.user_key);
                real.grants.push(g);
                model.grants.push(MGrant { value: (value, 0), amount_class: AMOUNT_CLASS[amount], tool_ok, expires_ms: issued + 10_000, used: false });
            }
            Op::Decide { value, surface, amount, context, sources, grant } => {
                let context = pick(&context);
                let sources = pick(&sources);
                let grant = grant.filter(|g| *g < real.grants.len());
                let action = ActionRequest {
                    tool: "pay".into(),
                    kind: ActionKind::Act,
                    risk: Risk::High,
                    values: vec![ActionValue {
                        key: "acct".into(),
                        value: SURFACES[value][surface].into(),
                        kind: ValueKind::Account,
                        sources: sources.iter().map(|&i| real.items[i].id()).collect(),
                    }],
                    amount: Some(AMOUNTS[amount].into()),
                    context: context.iter().map(|&i| real.items[i].id()).collect(),
                    grants: grant.map(|g| vec![real.grants[g].clone()]).unwrap_or_default(),
                };
                let mut ids: Vec<usize> = context.iter().chain(&sources).copied().collect();
                ids.sort();
                ids.dedup();
                let refs: Vec<&MemoryItem> = ids.iter().map(|&i| &real.items[i]).collect();
                let principals = real.principals.clone();
                let lookup = move |id: &PrincipalId| principals.iter().find(|p| p.id == *id).cloned();
                let used = real.used.clone();
                let is_used = move |n: &[u8; 16]| used.contains(n);
                let agent = real.principals[AGENTS[0]].clone();
                let class = ActionClass::of("pay", None);
                let ctx = DecisionContext {
                    tenant: &real.tenant,
                    store: "store-1",
                    now_ms: real.now,
                    actor: &agent,
                    class: &class,
                    items: &refs,
                    attestations: &real.attestations,
                    elevations: &real.elevations,
                    principal: &lookup,
                    grant_used: &is_used,
                    session: &Observed::clean(),
                    session_witnesses: &[],
                    neighbours: &[],
                };
                let out = real.gate.decide(&action, &ctx);
                let expected = model.decide(real.now, value, surface, AMOUNT_CLASS[amount], &context, &sources, grant);
                let got = match out.verdict().decision {
                    Decision::Allow => MDecision::Allow,
                    Decision::AskUser => MDecision::Ask,
                    Decision::Block => MDecision::Refuse,
                    d => panic!("authority layer produced {d:?}"),
                };
                assert_eq!(got, expected, "decision differs from the model: {:?}", out.verdict());
                let pv = out.verdict().pushed.first();
                let outcome = match (got, &out.verdict().rule, pv.and_then(|p| p.accepted.as_ref())) {
                    (MDecision::Allow, Rule::Granted, _) => ALLOW_GRANTED,
                    (MDecision::Allow, _, Some(Acceptance::Corroborated { new: true, .. })) => ALLOW_CORROBORATED,
                    (MDecision::Allow, _, Some(Acceptance::Corroborated { new: false, .. })) => ALLOW_ELEVATED_EARLIER,
                    (MDecision::Allow, _, _) => ALLOW_SUPPORTED,
                    (MDecision::Ask, _, _) => ASK,
                    (MDecision::Refuse, _, _) => REFUSE,
                };
                SEEN[outcome].fetch_add(1, Ordering::Relaxed);
                // Sec: every allowed value is supported, corroborated, elevated or granted.
                if got == MDecision::Allow {
                    for pv in &out.verdict().pushed {
                        match (&out.verdict().rule, &pv.accepted) {
                            (Rule::Granted, _) => assert_eq!(out.grant_uses().len(), 1),
                            (_, Some(Acceptance::Corroborated { attesters, new })) => assert!(!new || attesters.len() >= K),
                            (_, Some(Acceptance::Granted { .. })) => panic!("grants are reported by the Granted rule"),
                            (_, None) => assert!(pv.supported && !pv.support.is_empty(), "allowed without support: {pv:?}"),
                        }
                    }
                }
                if got == MDecision::Ask {
                    assert_eq!(out.verdict().ask.len(), 1, "an AskUser names the tuple");
                }
                for u in out.grant_uses() {
                    assert!(real.used.insert(u.grant.grant.nonce), "grant used twice");
                }
                real.elevations.extend(out.new_elevations().iter().cloned());
            }
        }
        // Labels agree with the model for every item.
        let labels: BTreeMap<usize, Lvl> = real
            .items
            .iter()
            .enumerate()
            .map(|(i, it)| {
                (i, match it.label().integrity() {
                    Integrity::Untrusted => Lvl::U,
                    Integrity::Agent => Lvl::A,
                    Integrity::Trusted => Lvl::T,
                })
            })
            .collect();
        for (i, m) in model.items.iter().enumerate() {
            assert_eq!(labels[&i], m.level, "label of item {i} differs from the model");
        }
    }
}

/// How often each outcome occurred across all sequences (coverage: the test must exercise every path).
static SEEN: [AtomicUsize; 6] = [const { AtomicUsize::new(0) }; 6];
const ALLOW_SUPPORTED: usize = 0;
const ALLOW_CORROBORATED: usize = 1;
const ALLOW_GRANTED: usize = 2;
const ASK: usize = 3;
const REFUSE: usize = 4;
const ALLOW_ELEVATED_EARLIER: usize = 5;

#[test]
fn gate_agrees_with_the_reference_model() {
    let config = ProptestConfig { cases: 10_000, max_shrink_iters: 2_000, failure_persistence: None, ..ProptestConfig::default() };
    // A fixed seed: the coverage check below must not depend on the run's luck. With a random
    // seed the rarest outcome (allowed by an earlier elevation) came out 13 times in one CI run
    // and at least 20 in others (regression: the flaky coverage failure of 2026-12-01).
    let rng = proptest::test_runner::TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha);
    let mut runner = proptest::test_runner::TestRunner::new_with_rng(config, rng);
    let result = runner.run(&prop::collection::vec(op(), 1..40), |ops| {
        run(ops);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let seen: Vec<usize> = SEEN.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    eprintln!("outcomes: allow-supported {} allow-corroborated {} allow-granted {} ask {} refuse {} allow-by-earlier-elevation {}", seen[0], seen[1], seen[2], seen[3], seen[4], seen[5]);
    assert!(seen.iter().all(|&n| n >= 20), "some outcome is barely exercised: {seen:?}");
}
