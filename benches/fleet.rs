//! Criterion bench of a fleet: N 8HP sedans in one headless Bevy App (`DrivelinePlugins`: the
//! vehicles' controllers, their coupled steps and the write-back of every part entity), one
//! fixed 1 ms tick per iteration on the default task pools (every core). The throughput is in
//! vehicle-steps, the figure the goal is stated in (a million per second for 1,000
//! cars on 2 cores). `driveline bench` runs the same fleet following a drive cycle.
//!
//! Run with `cargo bench --bench fleet`; CI runs it once as a smoke test on a small fleet (the
//! test profile is not optimised) and never asserts times.

use bevy_app::{App, FixedUpdate, TaskPoolPlugin};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use driveline::bevy::prelude::*;
use driveline::core::DriverInput;
use driveline::core::automatic::Selector;
use driveline::core::vehicle::{Road, Vehicle};
use std::path::Path;
use std::time::Duration;

/// One fixed tick of 1 ms.
fn tick(app: &mut App) {
    app.world_mut().resource_mut::<bevy_time::Time>().advance_by(Duration::from_millis(1));
    app.world_mut().run_schedule(FixedUpdate);
}

/// `n` sedans pulling away in D at throttles spread over 20 to 40 % (so that they cruise in
/// different gears), ticked for `warm_up` steps.
fn fleet(n: usize, warm_up: usize) -> App {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron");
    let spec = Vehicle::load(&path).expect("shipped vehicle").spec().clone();
    let mut app = App::new();
    app.add_plugins(TaskPoolPlugin::default());
    app.add_plugins(DrivelinePlugins::default());
    for i in 0..n {
        let root = spawn_vehicle(app.world_mut(), spec.clone(), Road::Body).expect("valid vehicle");
        let throttle = 0.2 + 0.2 * i as f64 / n as f64;
        let input = DriverInput { selector: Selector::Drive, throttle, ..Default::default() };
        app.world_mut().entity_mut(root).insert(VehicleInput(input));
    }
    for _ in 0..warm_up {
        tick(&mut app);
    }
    app
}

fn fleet_tick(c: &mut Criterion) {
    let mut g = c.benchmark_group("fleet_tick_1ms");
    // The test profile (CI's smoke run) is not optimised: a small fleet there.
    let (sizes, warm_up): (&[usize], usize) = if cfg!(debug_assertions) { (&[4], 5) } else { (&[100, 1000], 2000) };
    for &n in sizes {
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new("sedan_8hp", n), |b| {
            let mut app = fleet(n, warm_up);
            b.iter(|| tick(&mut app))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = fleet_tick
}
criterion_main!(benches);
