//! The fixed-seed slice of the fuzz harness that CI runs (about half a minute): every case
//! of seed 1 up to the count below ends without a panic, a hang, a non-finite output, a
//! runaway or a snapshot that does not replay. Files `check` accepts whose run then stops with
//! a typed step error (state kept) are still found (3 in this slice: tiny inertias under a
//! torque converter or a slipping clutch at a game step, and a force that grows with the
//! square of the speed in one direction, a true runaway); the test holds them to that count.
//! The long runs (`cargo run --release -p driveline_tools --bin fuzz -- --execs 10000000`)
//! are reported in the CHANGELOG.

use driveline_tools::fuzz::{Corpus, run};
use std::path::Path;

#[test]
fn a_fixed_seed_slice_of_the_fuzz_harness_finds_no_crash_and_no_new_failure() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = Corpus::load(&root).expect("the shipped files load");
    let report = run(&corpus, 1, 40_000, 2, None, &|_| {});
    assert_eq!(report.executions, 40_000);
    assert!(report.rejected > 5_000 && report.accepted > 1_000, "{report:?}");
    for f in &report.findings {
        eprintln!("case {}: {}: {:?}", f.case, f.what, f.defect);
    }
    assert_eq!(report.failed - report.errors_after_check, 0, "replay a case with `fuzz --seed 1 --case N`");
    assert!(report.errors_after_check <= 3, "{} typed errors after check", report.errors_after_check);
}
