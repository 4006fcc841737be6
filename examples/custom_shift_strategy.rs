//! Your own shift strategy for a planetary automatic. The 8HP sedan's built-in transmission
//! controller (its TCU) is removed from the vehicle's root. A system of this example, ordered
//! after `DrivelineSystems::Actuation` and before `Solve`, chooses the gear and writes every
//! shift element's `ClutchEngagement` itself. Each upshift is a clutch-to-clutch shift with
//! overlap: the oncoming element fills and ramps up while the offgoing one ramps down. The
//! engine controller, the converter, the tyres and the telemetry work as before. 60 % throttle
//! from rest to 130 km/h at 60 Hz, headless; each shift is checked: the oncoming element
//! locks, the speed ratio lands on the new gear's, and the car keeps pulling.
//!
//! `cargo run --example custom_shift_strategy`

use bevy_app::{App, FixedUpdate};
use bevy_ecs::prelude::*;
use bevy_time::Time;
use driveline::bevy::prelude::*;
use driveline::core::vehicle::{Road, Vehicle};
use driveline::core::{DriverInput, FrictionMode};
use std::path::Path;
use std::time::Duration;

const FRAME: Duration = Duration::from_nanos(16_666_667);

/// The strategy's tuning and state, on the vehicle's root.
#[derive(Component, Debug, Clone)]
struct ShiftStrategy {
    /// Engine speed at which to shift up, rpm.
    upshift_rpm: f64,
    /// Ramp-up time of the oncoming element, s.
    ramp: f64,
    /// Release time of the offgoing element, s, from the moment the oncoming one starts up:
    /// the overlap, in which both carry the torque. (Longer, both gears hold at once and the
    /// box ties up: at 0.1 s the car decelerates at 2.3 m/s^2 in a shift.)
    release: f64,
    /// The applied elements of each forward gear (indices into `VehicleParts::shift_elements`),
    /// gear 1 first; read from the gearbox's shift matrix.
    gears: Vec<Vec<usize>>,
    /// Gear in (or being shifted into), and the shift under way: (from, start time).
    gear: usize,
    shift: Option<(usize, f64)>,
    /// Completed shifts: (from, to, start time, time the oncoming element locked).
    log: Vec<(usize, usize, f64, f64)>,
}

impl ShiftStrategy {
    /// Engagement of element `k` at time `t`.
    fn engagement(&self, k: usize, t: f64) -> f64 {
        let in_gear = |g: usize| self.gears[g - 1].contains(&k);
        match self.shift {
            None => f64::from(u8::from(in_gear(self.gear))),
            Some((from, start)) => {
                let tau = t - start;
                let up = (tau / self.ramp).clamp(0.0, 1.0);
                let down = 1.0 - (tau / self.release).clamp(0.0, 1.0);
                match (in_gear(from), in_gear(self.gear)) {
                    (true, true) => 1.0,
                    (false, true) => up,
                    (true, false) => down,
                    (false, false) => 0.0,
                }
            }
        }
    }
}

/// Chooses the gear from the engine speed of the last step and writes every shift element's
/// engagement.
fn shift_strategy(
    mut cars: Query<(&mut ShiftStrategy, &VehicleParts, &VehicleTelemetry)>,
    mut elements: Query<(&mut ClutchEngagement, &CouplingState)>,
) {
    for (mut s, parts, telemetry) in &mut cars {
        let t = telemetry.0.time;
        if let Some((from, start)) = s.shift {
            // Done once every oncoming element is locked and the ramps have run out.
            let oncoming: Vec<usize> =
                s.gears[s.gear - 1].iter().copied().filter(|k| !s.gears[from - 1].contains(k)).collect();
            let locked = oncoming.iter().all(|&k| {
                elements.get(parts.shift_elements[k]).is_ok_and(|(_, c)| c.mode == Some(FrictionMode::Stuck))
            });
            if locked && t - start >= s.ramp.max(s.release) {
                let to = s.gear;
                s.log.push((from, to, start, t));
                s.shift = None;
            }
        } else if telemetry.0.turbine_rpm > s.upshift_rpm && s.gear < s.gears.len() {
            s.shift = Some((s.gear, t));
            s.gear += 1;
        }
        for (k, &e) in parts.shift_elements.iter().enumerate() {
            if let Ok((mut engagement, _)) = elements.get_mut(e) {
                engagement.0 = s.engagement(k, t);
            }
        }
    }
}

fn main() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron");
    let vehicle = Vehicle::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let spec = vehicle.spec().clone();
    let gearbox = spec.automatic.as_ref().and_then(|a| a.gearbox()).expect("an automatic with its gearbox loaded");
    let index = |name: &str| gearbox.elements.iter().position(|e| e.name == name).expect("element of the matrix");
    let gears: Vec<Vec<usize>> = (1..)
        .map_while(|g: i32| gearbox.gears.iter().find(|(n, _)| *n == g.to_string()))
        .map(|(_, applied)| applied.iter().map(|n| index(n)).collect())
        .collect();
    let tcu = vehicle.tcu().expect("an automatic");
    let ratios: Vec<f64> = (1..=gears.len()).map(|g| tcu.forward_ratio(g).expect("a forward gear")).collect();
    let final_drive = spec.driveline.final_drive;

    let mut app = App::new();
    app.add_plugins(DrivelinePlugins::default());
    app.add_systems(FixedUpdate, shift_strategy.after(DrivelineSystems::Actuation).before(DrivelineSystems::Solve));
    let root = spawn_vehicle(app.world_mut(), spec, Road::Body).unwrap_or_else(|e| panic!("{e}"));
    // The TCU goes; the park pawl comes out and the lock-up stays open: our inputs now.
    app.world_mut().entity_mut(root).remove::<TransmissionController>().insert(ShiftStrategy {
        upshift_rpm: 5200.0,
        ramp: 0.3,
        release: 0.03,
        gears,
        gear: 1,
        shift: None,
        log: Vec::new(),
    });
    let mut inputs = app.world_mut().get_mut::<DrivelineInputs>(root).expect("a driveline");
    inputs.set("park.engage", 0.0);
    inputs.set("lockup.force", 0.0);

    println!("== 8HP sedan, the TCU removed: our own clutch-to-clutch upshifts at 5200 turbine rpm, 60 Hz");
    let (mut t100, mut lowest_accel_in_shift) = (f64::NAN, f64::INFINITY);
    let mut failures = 0;
    for k in 0..(30.0 / FRAME.as_secs_f64()) as usize {
        let t = k as f64 * FRAME.as_secs_f64();
        // Idle in first for half a second while the elements fill, then 60 % throttle (at full
        // throttle this car spins its rear tyres in the first three gears).
        let throttle = if t < 0.5 { 0.0 } else { 0.6 };
        app.world_mut().get_mut::<VehicleInput>(root).expect("a vehicle").0 =
            DriverInput { throttle, ..Default::default() };
        app.world_mut().resource_mut::<Time>().advance_by(FRAME);
        app.world_mut().run_schedule(FixedUpdate);
        failures += app.world().resource::<Messages<DrivelineStepFailed>>().iter_current_update_messages().count();
        let tm = app.world().get::<VehicleTelemetry>(root).expect("a vehicle").0;
        if app.world().get::<ShiftStrategy>(root).expect("ours").shift.is_some() && tm.speed > 1.0 {
            lowest_accel_in_shift = lowest_accel_in_shift.min(tm.acceleration);
        }
        if t100.is_nan() && tm.speed * 3.6 >= 100.0 {
            t100 = tm.time - 0.5;
        }
        if tm.speed * 3.6 >= 130.0 {
            break;
        }
    }
    let s = app.world().get::<ShiftStrategy>(root).expect("ours").clone();
    let tm = app.world().get::<VehicleTelemetry>(root).expect("a vehicle").0;
    for &(from, to, start, locked) in &s.log {
        println!("  {from} -> {to} at {start:6.2} s: oncoming locked after {:4.0} ms", (locked - start) * 1e3);
    }
    // The speed ratio now: engine over output, through the converter's slip at most.
    let output_rpm = tm.wheel_speed[2].max(tm.wheel_speed[3]) * final_drive * 60.0 / std::f64::consts::TAU;
    let ratio = tm.turbine_rpm / output_rpm;
    println!(
        "0-100 km/h in {t100:.2} s; {} shifts, in gear {} at {:.0} km/h (turbine/output {ratio:.3}, gear ratio {:.3}); lowest acceleration in a shift {lowest_accel_in_shift:.2} m/s^2; {failures} step failures",
        s.log.len(),
        s.gear,
        tm.speed * 3.6,
        ratios[s.gear - 1],
    );
    assert_eq!(failures, 0, "no step may fail");
    assert!(s.log.len() >= 3 && s.shift.is_none(), "at least three completed upshifts: {:?}", s.log);
    assert!(tm.running, "the engine controller kept the engine running");
    // Each oncoming element locked within the ramps and half a second more.
    assert!(s.log.iter().all(|&(_, _, start, locked)| locked - start < 0.85), "{:?}", s.log);
    // The turbine turns at the gear's ratio to the output (the wheels roll: slip of a few %).
    assert!((ratio / ratios[s.gear - 1] - 1.0).abs() < 0.05, "turbine/output {ratio} in gear {}", s.gear);
    // No tie-up: the overlap never brakes the car.
    assert!(lowest_accel_in_shift > 0.0, "the car decelerated in a shift: {lowest_accel_in_shift} m/s^2");
}
