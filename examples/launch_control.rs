//! A launch control as a user system: the driver floors the throttle with the clutch pedal up
//! in first, and a system ordered after `DrivelineSystems::Actuation` and before `Solve` writes
//! the clutch's `ClutchEngagement` every step, holding the engine near its launch speed and the
//! rear tyres near their best slip while the clutch slips, until the car has caught up and the
//! clutch locks. Compared with dropping
//! the clutch (the built-in actuator, pedal up at once) and with a driver's slow release.
//! Runs at 60 Hz, headless.
//!
//! `cargo run --example launch_control`

use bevy_app::{App, FixedUpdate};
use bevy_ecs::prelude::*;
use bevy_time::Time;
use driveline::bevy::prelude::*;
use driveline::core::DriverInput;
use driveline::core::vehicle::{Road, Vehicle};
use std::path::Path;
use std::time::Duration;

const FRAME: Duration = Duration::from_nanos(16_666_667);

/// The launch controller's tuning, on the vehicle's root.
#[derive(Component, Clone, Copy)]
struct LaunchControl {
    /// Engine speed held while the clutch slips, rpm.
    target_rpm: f64,
    /// Engagement per rpm of error (proportional gain), 1/rpm.
    gain: f64,
    /// Rear tyre slip aimed at, m/s, and the engagement taken off per m/s above it.
    slip_target: f64,
    slip_gain: f64,
    /// The engagement at the target speed (the feed-forward: the clutch that carries the
    /// engine's torque there), [0, 1].
    hold: f64,
    /// Done: the clutch locked; the built-in actuator (pedal up) has it from here.
    done: bool,
}

/// Writes the clutch engagement from the engine speed of the last step, at most what the
/// built-in actuator applies for the driver's pedal this step.
fn launch_control(
    mut cars: Query<(&mut LaunchControl, &VehicleParts, &VehicleTelemetry)>,
    mut clutches: Query<(&mut ClutchEngagement, &CouplingState)>,
) {
    for (mut lc, parts, telemetry) in &mut cars {
        let Some(clutch) = parts.clutch else { continue };
        let Ok((mut engagement, state)) = clutches.get_mut(clutch) else { continue };
        if lc.done || telemetry.0.time == 0.0 {
            continue;
        }
        if state.mode == Some(driveline::core::FrictionMode::Stuck) && telemetry.0.speed > 1.0 {
            lc.done = true;
            continue;
        }
        let t = &telemetry.0;
        let error = t.engine_rpm - lc.target_rpm;
        let spin = (t.tyre_slip[2].max(t.tyre_slip[3]) - lc.slip_target).max(0.0);
        // The built-in actuator wrote the pedal's engagement for this step in `Actuation`:
        // never more than the driver allows.
        let pedal = engagement.0;
        engagement.0 = (lc.hold + lc.gain * error - lc.slip_gain * spin).clamp(0.0, pedal);
    }
}

/// One launch, with the controller or without, `pedal(t)` the driver's clutch pedal from the
/// start. Returns (time to 60 km/h, lowest engine rpm in the first 2 s, mean rear-tyre slip
/// in the first 2 s, clutch temperature at the end).
fn launch(name: &str, with_controller: bool, pedal: impl Fn(f64) -> f64) -> (f64, f64, f64, f64) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/nissan_350z.ron");
    let spec = Vehicle::load(&path).unwrap_or_else(|e| panic!("{e}")).spec().clone();
    let mut app = App::new();
    app.add_plugins(DrivelinePlugins::default());
    app.add_systems(FixedUpdate, launch_control.after(DrivelineSystems::Actuation).before(DrivelineSystems::Solve));
    let root = spawn_vehicle(app.world_mut(), spec, Road::Body).unwrap_or_else(|e| panic!("{e}"));
    // First gear with the pedal down, then full throttle from t = 1.5 s.
    let mut input = DriverInput { clutch: 1.0, gear: 1, ..Default::default() };
    let (mut t60, mut low_rpm, mut slip_sum, mut n) = (f64::NAN, f64::INFINITY, 0.0, 0);
    for k in 0..480 {
        let t = k as f64 * FRAME.as_secs_f64();
        if t >= 1.5 {
            input.throttle = 1.0;
            input.clutch = pedal(t - 1.5);
            if with_controller && app.world().get::<LaunchControl>(root).is_none() {
                let lc = LaunchControl {
                    target_rpm: 4000.0,
                    gain: 2e-4,
                    slip_target: 1.0,
                    slip_gain: 0.1,
                    hold: 0.3,
                    done: false,
                };
                app.world_mut().entity_mut(root).insert(lc);
            }
        }
        app.world_mut().get_mut::<VehicleInput>(root).expect("a vehicle").0 = input;
        app.world_mut().resource_mut::<Time>().advance_by(FRAME);
        app.world_mut().run_schedule(FixedUpdate);
        let tm = app.world().get::<VehicleTelemetry>(root).expect("a vehicle").0;
        // (From 0.3 s in: the engine first rises from idle under the throttle.)
        if (1.8..3.5).contains(&t) {
            low_rpm = low_rpm.min(tm.engine_rpm);
            slip_sum += tm.tyre_slip[2].abs();
            n += 1;
        }
        if t60.is_nan() && tm.speed * 3.6 >= 60.0 {
            t60 = tm.time - 1.5;
        }
    }
    let tm = app.world().get::<VehicleTelemetry>(root).expect("a vehicle").0;
    println!(
        "  {name:<28} 0-60 km/h {:5.2} s   lowest {:5.0} rpm   mean rear slip {:5.2} m/s   clutch {:5.1} C   {}",
        t60,
        low_rpm,
        slip_sum / n as f64,
        tm.clutch_temperature,
        if tm.running { "running" } else { "STALLED" }
    );
    (t60, low_rpm, slip_sum / n as f64, tm.clutch_temperature)
}

fn main() {
    println!("== Nissan 350Z, first gear, full throttle at 60 Hz: three ways to let the clutch in");
    let dropped = launch("clutch dropped", false, |_| 0.0);
    let driver = launch("driver's release over 1 s", false, |t| (1.0 - t).max(0.0));
    let controlled = launch("launch control at 4000 rpm", true, |_| 0.0);
    println!(
        "\nThe controller holds the engine up where the dropped clutch pulls it down ({:.0} vs {:.0} rpm) and the rear slip at {:.2} m/s (dropped: {:.2}); 60 km/h in {:.2} s.",
        controlled.1, dropped.1, controlled.2, dropped.2, controlled.0
    );
    assert!(controlled.0.is_finite() && driver.0.is_finite());
    assert!(controlled.1 > dropped.1, "the launch control should keep the engine speed up");
}
