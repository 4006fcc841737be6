//! Criterion bench of the plugin's overhead for one car: the core `Vehicle::step` of 1 ms
//! beside one `FixedUpdate` tick of 1 ms of the same car in a headless Bevy App
//! (`DrivelinePlugins`: edits collected, inputs handed over, the controllers and the coupled
//! step, the write-back of every part). The overhead is the difference. Also the tick with a
//! single-threaded fixed schedule, and with the parts marked `SkipWriteBack`; and an empty tick
//! (one empty system), the executor's own share.
//!
//! Run with `cargo bench --bench plugin_tick`; CI runs it once as a smoke test and never
//! asserts times.

use bevy_app::{App, FixedUpdate, TaskPoolPlugin};
use bevy_ecs::entity::Entity;
use bevy_ecs::schedule::SingleThreadedExecutor;
use criterion::{Criterion, criterion_group, criterion_main};
use driveline::bevy::prelude::*;
use driveline::core::automatic::Selector;
use driveline::core::vehicle::Road;
use driveline::core::{DriverInput, Vehicle};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

fn car(file: &str) -> Vehicle {
    Vehicle::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles").join(file)).expect("shipped vehicle")
}

/// The driver's input at time `t` of the warm-up: the 350Z away in first and up to third, the
/// sedan away in D; both end cruising at part throttle.
fn input_at(file: &str, t: f64) -> DriverInput {
    if file == "sedan_8hp.ron" {
        return DriverInput {
            selector: Selector::Drive,
            brake: if t < 1.0 { 1.0 } else { 0.0 },
            throttle: if t < 1.0 { 0.0 } else { 0.3 },
            ..Default::default()
        };
    }
    driveline::core::vehicle::driver::first_to_third(t, 0.3)
}

const WARM_UP: usize = 12_000;

fn tick(app: &mut App) {
    app.world_mut().resource_mut::<bevy_time::Time>().advance_by(Duration::from_millis(1));
    app.world_mut().run_schedule(FixedUpdate);
}

/// One car in an App, warmed up to cruising like [`cruising_core`].
fn cruising_app(file: &str, single_threaded: bool, skip: bool) -> (App, Entity) {
    let mut app = App::new();
    app.add_plugins(TaskPoolPlugin::default());
    app.add_plugins(DrivelinePlugins::default());
    if single_threaded {
        app.edit_schedule(FixedUpdate, |s| {
            s.set_executor(SingleThreadedExecutor::new());
        });
    }
    let root = spawn_vehicle(app.world_mut(), car(file).spec().clone(), Road::Body).expect("valid vehicle");
    let warm_up = if cfg!(debug_assertions) { 10 } else { WARM_UP };
    for k in 0..warm_up {
        app.world_mut().get_mut::<VehicleInput>(root).expect("a vehicle").0 = input_at(file, k as f64 * 1e-3);
        tick(&mut app);
    }
    if skip {
        skip_write_back(app.world_mut(), root);
    }
    (app, root)
}

fn cruising_core(file: &str) -> (Vehicle, DriverInput) {
    let mut v = car(file);
    let warm_up = if cfg!(debug_assertions) { 10 } else { WARM_UP };
    for k in 0..warm_up {
        v.step(&input_at(file, k as f64 * 1e-3), 1e-3).expect("warm-up step");
    }
    (v, input_at(file, warm_up as f64 * 1e-3))
}

fn plugin_tick(c: &mut Criterion) {
    let mut g = c.benchmark_group("plugin_tick_1ms");
    // What a fixed tick costs with no driveline at all: the executor's own share.
    for (name, single) in [("empty_app_tick", false), ("empty_app_tick_single_threaded", true)] {
        g.bench_function(name, |b| {
            let mut app = App::new();
            app.add_plugins(TaskPoolPlugin::default());
            app.init_resource::<bevy_time::Time>();
            app.add_systems(FixedUpdate, || {});
            if single {
                app.edit_schedule(FixedUpdate, |s| {
                    s.set_executor(SingleThreadedExecutor::new());
                });
            }
            b.iter(|| tick(&mut app))
        });
    }
    for file in ["nissan_350z.ron", "sedan_8hp.ron"] {
        g.bench_function(format!("{file}/core_step"), |b| {
            let (mut v, input) = cruising_core(file);
            b.iter(|| v.step(black_box(&input), 1e-3).unwrap())
        });
        for (name, single, skip) in [
            ("app_tick", false, false),
            ("app_tick_single_threaded", true, false),
            ("app_tick_skip_write_back", true, true),
        ] {
            g.bench_function(format!("{file}/{name}"), |b| {
                let (mut app, _) = cruising_app(file, single, skip);
                b.iter(|| tick(&mut app))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, plugin_tick);
criterion_main!(benches);
