//! The fixed-seed slice of the fuzz harness that CI runs (about half a minute): every case
//! of seed 1 up to the count below ends without a panic, a hang, a non-finite output, a
//! runaway, a snapshot that does not replay, or a file `check` accepts whose run then stops
//! with a typed step error (a blow-up of the motion itself, a drive that grows with the square
//! of the speed, is counted apart: none in this slice). The long runs
//! (`cargo run --release -p driveline_tools --bin fuzz -- --execs 10000000`) are reported in
//! the CHANGELOG.

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
    assert_eq!(report.failed, 0, "replay a case with `fuzz --seed 1 --case N`");
}
