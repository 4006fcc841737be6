//! Criterion benches of the core solver: ns per fixed step of the MSL scenarios.
//!
//! Run with `cargo bench --bench solver`; CI runs them once as smoke tests
//! (`cargo test --benches`) and never asserts times.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use driveline::core::{IntegrationParameters, Scenario, Simulation};
use std::hint::black_box;
use std::path::Path;

fn load(name: &str, track_energy: bool) -> Simulation {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenarios/msl").join(format!("{name}.ron"));
    let (_, net) = Scenario::load_network(&path).expect("shipped scenario");
    Simulation::with_parameters(net, IntegrationParameters { track_energy, ..Default::default() })
}

/// One step at dt = 1 ms, cycling through the whole scenario (events, locks and break-aways
/// included) so the figure is the average over a full run.
fn step_msl(c: &mut Criterion) {
    let mut g = c.benchmark_group("msl_step_1ms");
    for name in ["CoupledClutches", "SimpleGearShift", "First"] {
        for energy in [true, false] {
            let id = BenchmarkId::new(name, if energy { "energy" } else { "no_energy" });
            g.bench_function(id, |b| {
                let mut sim = load(name, energy);
                let fresh = sim.clone();
                let t_end = 1.5;
                b.iter(|| {
                    if sim.time() >= t_end {
                        sim = fresh.clone();
                    }
                    sim.step(black_box(1e-3)).unwrap();
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, step_msl);
criterion_main!(benches);
