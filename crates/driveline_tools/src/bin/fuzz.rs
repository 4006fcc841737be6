//! The fuzz harness's runner (see `driveline_tools::fuzz`).
//!
//! `fuzz [--seed S] [--execs N] [--threads T] [--minutes M] [--case K]`: runs cases 0..N of seed
//! S on T threads (at most M minutes) and prints the totals and every failed case; `--case K`
//! replays one case and prints what it was. Exit code 1 when a case failed.

use driveline_tools::fuzz::{Corpus, Report, run, run_case};
use std::path::Path;
use std::time::Duration;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let seed: u64 = arg("--seed").and_then(|s| s.parse().ok()).unwrap_or(1);
    let execs: u64 = arg("--execs").and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let threads: usize = arg("--threads").and_then(|s| s.parse().ok()).unwrap_or(2);
    let minutes: Option<f64> = arg("--minutes").and_then(|s| s.parse().ok());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = match Corpus::load(&root) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return std::process::ExitCode::from(2);
        }
    };
    if let Some(case) = arg("--case").and_then(|s| s.parse::<u64>().ok()) {
        let (what, r) = run_case(&corpus, seed, case);
        println!("case {case} of seed {seed}: {what}: {r:?}");
        return if r.is_ok() { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::from(1) };
    }
    let show = |r: &Report| {
        eprintln!(
            "{:>10} executions in {:>7.0} s ({:.0}/s): {} rejected, {} accepted, {} steps, {} blow-ups of the motion, {} failed ({} typed errors after check)",
            r.executions,
            r.seconds,
            r.executions as f64 / r.seconds.max(1e-9),
            r.rejected,
            r.accepted,
            r.steps,
            r.blowups,
            r.failed,
            r.errors_after_check
        )
    };
    let report = run(&corpus, seed, execs, threads, minutes.map(|m| Duration::from_secs_f64(m * 60.0)), &show);
    show(&report);
    eprintln!(
        "failed by kind: {} panics, {} non-finite outputs, {} runaways, {} snapshot mismatches, {} slow, {} typed errors after check",
        report.panics, report.non_finite, report.diverged, report.snapshot, report.slow, report.errors_after_check
    );
    for f in &report.findings {
        println!("case {}: {}: {:?}", f.case, f.what, f.defect);
    }
    if report.failed == 0 { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::from(1) }
}
