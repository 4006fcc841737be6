//! A full-throttle launch of the 8HP sedan through all eight gears, printing every shift's
//! figures (phases, output torque dip, flare, jerk, element energy and temperature).
//!
//! `cargo run --release --example automatic_launch [-- --verbose]` (verbose: speeds, phases and
//! every shift element's force, torque and slip every 50 ms, every 10 ms during shifts).

use driveline::core::automatic::Selector;
use driveline::core::vehicle::{VehicleEventKind, gear_name};
use driveline::core::{DriverInput, Vehicle};
use std::path::Path;

fn main() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron");
    let mut car = Vehicle::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let dt = 1e-3;
    let verbose = std::env::args().any(|a| a == "--verbose");
    let mut input = DriverInput { selector: Selector::Drive, brake: 1.0, ..DriverInput::default() };
    let mut cuts = 0;
    for k in 0..40_000 {
        let t = k as f64 * dt;
        if t >= 1.0 {
            input.brake = 0.0;
            input.throttle = 1.0;
        }
        car.step(&input, dt).unwrap_or_else(|e| panic!("t {t}: {e}"));
        let tm = car.telemetry();
        if verbose
            && (k % 50 == 0
                || (car.telemetry().shift_phase != driveline::core::automatic::ShiftPhase::None && k % 10 == 0))
        {
            println!(
                "t {:6.2} gear {} sel {} phase {:?} eng {:5.0} turb {:5.0} v {:5.1} km/h lockup {:.2} {} Tw {:6.0}",
                tm.time,
                tm.engaged_gear,
                tm.selected_gear,
                tm.shift_phase,
                tm.engine_rpm,
                tm.turbine_rpm,
                tm.speed * 3.6,
                tm.lockup_engagement,
                tm.lockup_locked,
                tm.drive_torque.iter().sum::<f64>()
            );
            for e in tm.elements.iter().filter(|e| e.present) {
                print!("  [{:.2} {:6.0} {:6.1}{}]", e.force, e.torque, e.slip, if e.locked { "L" } else { "" });
            }
            println!("  conv {:.0}", tm.converter_torque);
        }
        for e in car.events() {
            match e.kind {
                VehicleEventKind::ShiftCompleted { report: Some(r), duration, .. } => println!(
                    "{:6.3} s  {} -> {} in {:.0} ms: {r}",
                    e.time,
                    gear_name(r.from),
                    gear_name(r.to),
                    duration * 1e3
                ),
                VehicleEventKind::ShiftCompleted { .. } => {}
                // The limiter cuts every few tens of ms in first gear: counted, not printed.
                VehicleEventKind::LimiterCut => cuts += 1,
                k => println!("{:6.3} s  {k}", e.time),
            }
        }
        if car.telemetry().engaged_gear == 8 && t > 5.0 {
            println!(
                "8th gear at {:.2} s, {:.0} km/h ({cuts} rev-limiter cuts on the way)",
                t,
                car.telemetry().speed * 3.6
            );
            break;
        }
    }
}
