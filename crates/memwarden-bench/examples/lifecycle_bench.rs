//! Run the lifecycle benchmark outside the CLI (timing runs, diagnostics).
//!
//! `cargo run --release -p memwarden-bench --features lifecycle-wip --example lifecycle_bench --
//!  [--quick] [--out DIR] [--threads N] [--seed N] [--tasks N] [--seeds N] [--settings a,b]
//!  [--topologies a,b] [--variants a,b] [--main-only] [--profile persuadable|weak|strong] [--openai]`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[cfg(not(feature = "lifecycle-wip"))]
fn main() {
    eprintln!("build with --features lifecycle-wip");
}

#[cfg(feature = "lifecycle-wip")]
fn main() {
    use memwarden_bench::lifecycle::{
        BackboneProfile, LifecycleAgentChoice, LifecycleBenchOptions, LifecycleScale, Setting, Topology, Variant, run_lifecycle,
        write_lifecycle,
    };

    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let has = |name: &str| args.iter().any(|a| a == name);
    let mut opts = LifecycleBenchOptions::new(get("--out").unwrap_or_else(|| "/tmp/mw-lifecycle".into()));
    opts.quick = has("--quick");
    opts.git_rev = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    if let Some(t) = get("--threads") {
        opts.threads = Some(t.parse().unwrap());
    }
    if let Some(p) = get("--profile") {
        opts.agent = LifecycleAgentChoice::Scripted(BackboneProfile::ALL.into_iter().find(|x| x.name == p).expect("profile"));
    }
    if has("--openai") {
        opts.agent = LifecycleAgentChoice::from_name("openai").unwrap();
    }
    if let Some(s) = get("--seed") {
        opts.seed = s.parse().unwrap();
    }
    let custom = ["--tasks", "--seeds", "--settings", "--topologies", "--variants"].iter().any(|a| has(a)) || has("--main-only");
    if custom {
        let mut sc = if opts.quick { LifecycleScale::quick() } else { LifecycleScale::full() };
        if let Some(t) = get("--tasks") {
            sc.tasks = t.parse().unwrap();
            sc.warmup = sc.tasks / 10;
        }
        if let Some(s) = get("--seeds") {
            sc.seeds = s.parse().unwrap();
        }
        if let Some(s) = get("--settings") {
            sc.settings = s.split(',').map(|x| Setting::from_name(x).expect("setting")).collect();
        }
        if let Some(s) = get("--topologies") {
            sc.topologies = s.split(',').map(|x| Topology::ALL.into_iter().find(|t| t.name() == x).expect("topology")).collect();
        }
        if let Some(s) = get("--variants") {
            sc.variants = s.split(',').map(|x| Variant::from_name(x).expect("variant")).collect();
        }
        if has("--main-only") {
            sc.attack_free.clear();
            sc.scale_agents.clear();
            sc.profile_settings.clear();
            sc.route_variants.clear();
        }
        opts.scale = Some(sc);
    }
    let started = std::time::Instant::now();
    let mut last = 0usize;
    let report = run_lifecycle(&opts, &mut |done, total| {
        if done == total || done >= last + (total / 20).max(1) {
            last = done;
            eprintln!("{done}/{total} runs ({:.0} s)", started.elapsed().as_secs_f64());
        }
    })
    .unwrap();
    let (json, md, png) = write_lifecycle(&report, &opts.out).unwrap();
    eprintln!("wall time {:.1} s -> {} {} {}", report.wall_time_s, json.display(), md.display(), png.display());
    for t in report.table5.iter().filter(|t| t.setting == "all") {
        println!(
            "{:<18} MDSR@3 {:>5.1}  RDA@3 {:>5.1}  PMUR {:>5.1}  PMUR-A {:>5.1}  SecASR {:>5.1}",
            t.variant,
            t.mdsr3.unwrap_or(f64::NAN),
            t.rda3.unwrap_or(f64::NAN),
            t.pmur.unwrap_or(f64::NAN),
            t.pmur_a.unwrap_or(f64::NAN),
            t.sec_asr.unwrap_or(f64::NAN)
        );
    }
}
