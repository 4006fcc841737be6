//! One car (or `cars` of them) in a headless Bevy App with a single-threaded fixed schedule,
//! ticked at 1 ms: a callgrind target for the plugin's overhead over the core step (`measure`
//! is the ticks; a fleet runs on a one-thread compute pool so that its work is counted there).
//!
//! `valgrind --tool=callgrind --toggle-collect='*prof_plugin::measure*' target/release/prof_plugin nissan_350z.ron 2000 [cars [warm-up ticks]]`

use bevy_app::{App, FixedUpdate};
use bevy_driveline::prelude::*;
use bevy_ecs::schedule::SingleThreadedExecutor;
use driveline_core::automatic::Selector;
use driveline_core::vehicle::Road;
use driveline_core::vehicle::driver::first_to_third;
use driveline_core::{DriverInput, Vehicle};
use std::path::Path;
use std::time::Duration;

fn tick(app: &mut App) {
    app.world_mut().resource_mut::<bevy_time::Time>().advance_by(Duration::from_millis(1));
    app.world_mut().run_schedule(FixedUpdate);
}

#[inline(never)]
fn measure(app: &mut App, n: usize) {
    for _ in 0..n {
        tick(app);
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let file = args.next().unwrap_or_else(|| "nissan_350z.ron".into());
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let cars: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
    let warm_up: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(12_000);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/vehicles").join(&file);
    let spec = match Vehicle::load(&path) {
        Ok(v) => v.spec().clone(),
        Err(e) => return eprintln!("{e}"),
    };
    let automatic = spec.automatic.is_some();
    let mut app = App::new();
    if cars > 1 {
        let one = bevy_app::TaskPoolOptions::with_num_threads(1);
        app.add_plugins(bevy_app::TaskPoolPlugin { task_pool_options: one });
    }
    app.add_plugins(DrivelinePlugins::default());
    app.edit_schedule(FixedUpdate, |s| {
        s.set_executor(SingleThreadedExecutor::new());
    });
    let mut roots = Vec::new();
    for _ in 0..cars {
        match spawn_vehicle(app.world_mut(), spec.clone(), Road::Body) {
            Ok(r) => roots.push(r),
            Err(e) => return eprintln!("{e}"),
        }
    }
    for k in 0..warm_up {
        for &root in &roots {
            if let Some(mut input) = app.world_mut().get_mut::<VehicleInput>(root) {
                input.0 = if automatic {
                    // Away in D after a second at rest.
                    let throttle = if k < 1000 { 0.0 } else { 0.3 };
                    DriverInput { selector: Selector::Drive, throttle, ..Default::default() }
                } else {
                    first_to_third(k as f64 * 1e-3, 0.3)
                };
            }
        }
        tick(&mut app);
    }
    let start = std::time::Instant::now();
    measure(&mut app, n);
    let per_tick = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!("{per_tick:.3} us per tick, {:.3} us per vehicle-step", per_tick / cars as f64);
}
