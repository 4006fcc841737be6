//! The `ModelicaTest.Rotational` models in `assets/scenarios/modelica_test/`. The published
//! reference results of the MSL regression tests are not available here, so each model is held
//! to its own converged solution: every CSV column at 1 ms inside the regression tube
//! (2e-3 max(1, range)) of the same model at 0.1 ms with the same mode sequence, and the final
//! values at 1/60 s within 5e-2 of the range.

use driveline::core::{CsvRecorder, Scenario, Simulation};
use std::path::Path;

/// Every column after every step of `dt` to `t_end`, and the `(element, from, to)` mode events.
fn run(path: &Path, dt: f64) -> (Vec<String>, Vec<(f64, Vec<f64>)>, Vec<(usize, i32, i32)>) {
    let (sc, net) = Scenario::load_network(path).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Simulation::new(net);
    let csv = CsvRecorder::new(&sim);
    let (mut rows, mut events, mut buf) = (Vec::new(), Vec::new(), Vec::new());
    let n = (sc.t_end / dt).round() as usize;
    for k in 1..=n {
        sim.step(k as f64 * dt - sim.time()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        csv.values(&sim, &mut buf);
        rows.push((sim.time(), buf.clone()));
        events.extend(sim.events().iter().map(|e| (e.element, e.from.code(), e.to.code())));
    }
    (csv.names().to_vec(), rows, events)
}

#[test]
fn every_modelica_test_model_meets_the_regression_tube_against_its_converged_solution() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenarios/modelica_test");
    let mut models = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let (names, fine, fine_events) = run(&path, 1e-4);
        let (_, ms, ms_events) = run(&path, 1e-3);
        let (_, coarse, _) = run(&path, 1.0 / 60.0);
        let name = path.file_stem().unwrap().to_string_lossy();
        assert_eq!(ms_events, fine_events, "{name}: the mode sequence at 1 ms");
        for (c, col) in names.iter().enumerate() {
            let values = fine.iter().map(|r| r.1[c]).filter(|v| v.is_finite());
            let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let range = (hi - lo).max(1.0);
            // The 1 ms rows at the same instants as every tenth fine row.
            let worst = ms
                .iter()
                .zip(fine.iter().skip(9).step_by(10))
                .map(|(a, b)| (a.1[c] - b.1[c]).abs())
                .filter(|e| !e.is_nan())
                .fold(0.0, f64::max);
            assert!(worst <= 2e-3 * range, "{name}: {col} at 1 ms is {worst} off, outside 2e-3 x {range}");
            let last = (coarse.last().unwrap().1[c] - fine.last().unwrap().1[c]).abs();
            if !last.is_nan() {
                assert!(last <= 5e-2 * range, "{name}: {col} ends {last} off at 1/60 s (range {range})");
            }
        }
        models += 1;
    }
    assert!(models >= 1);
}

#[test]
fn an_element_moves_alike_with_its_support_inside_and_on_a_fixed() {
    // TestBearingConversion: each pair is the same element, support inside (useSupport = false)
    // and support connected to a Fixed. Equal to rounding (the networks number them apart).
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenarios/modelica_test/TestBearingConversion.ron");
    let (sc, net) = Scenario::load_network(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Simulation::new(net);
    let id = |n: &str| sim.network().elements.iter().position(|e| e.name == n).unwrap();
    let pairs: Vec<(usize, usize)> = [
        ("inertia", "inertia1"),
        ("inertia2", "inertia3"),
        ("inertia4", "inertia6"),
        ("inertia8", "inertia10"),
        ("inertia12", "inertia13"),
        ("inertia14", "inertia15"),
        ("inertia16", "inertia17"),
        ("inertia18", "inertia19"),
        ("inertia20", "inertia21"),
    ]
    .iter()
    .map(|(a, b)| (id(a), id(b)))
    .collect();
    let mut moved = 0;
    for k in 1..=(sc.t_end / 1e-3).round() as usize {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        for &(a, b) in &pairs {
            let (p, q) = (sim.body_state(a).unwrap(), sim.body_state(b).unwrap());
            assert!((p.0 - q.0).abs() <= 1e-12 && (p.1 - q.1).abs() <= 1e-12, "t {}: {p:?} against {q:?}", sim.time());
            moved += usize::from(p.1 != 0.0);
        }
    }
    assert!(moved > 0, "nothing moved");
}
