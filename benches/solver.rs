//! Criterion benches of the core solver: ns per fixed step of the MSL scenarios.
//!
//! Run with `cargo bench --bench solver`; CI runs them once as smoke tests
//! (`cargo test --benches`) and never asserts times.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use driveline::core::{IntegrationParameters, Scenario, Simulation};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

fn load(name: &str, track_energy: bool) -> Simulation {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenarios/msl").join(format!("{name}.ron"));
    let (_, net) = Scenario::load_network(&path).expect("shipped scenario");
    Simulation::with_parameters(net, IntegrationParameters { track_energy, ..Default::default() })
}

/// One step at dt = 1 ms, cycling through the whole scenario (events, locks and break-aways
/// included) so the figure is the average over a full run. Only the steps are timed: the
/// return to t = 0 (a clone of the fresh simulation, the drop of the old one) is not.
fn step_msl(c: &mut Criterion) {
    let mut g = c.benchmark_group("msl_step_1ms");
    for name in ["CoupledClutches", "SimpleGearShift", "First"] {
        for energy in [true, false] {
            let id = BenchmarkId::new(name, if energy { "energy" } else { "no_energy" });
            g.bench_function(id, |b| {
                let fresh = load(name, energy);
                let mut sim = fresh.clone();
                let t_end = 1.5;
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    let mut left = iters;
                    while left > 0 {
                        if sim.time() >= t_end {
                            sim = fresh.clone();
                        }
                        let t0 = Instant::now();
                        while left > 0 && sim.time() < t_end {
                            sim.step(black_box(1e-3)).unwrap();
                            left -= 1;
                        }
                        total += t0.elapsed();
                    }
                    total
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, step_msl);
criterion_main!(benches);
