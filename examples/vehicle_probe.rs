//! Temporary probe (deleted before commit).
use driveline::core::{DriverInput, Vehicle};
use std::path::Path;

fn main() {
    let mut v = Vehicle::load(Path::new("assets/vehicles/race_sequential.ron")).unwrap_or_else(|e| panic!("{e}"));
    let dt = 1e-3;
    let mut inp = DriverInput::default();
    let mut last = 0.0;
    for k in 0..10000 {
        let t = k as f64 * dt;
        inp.shift_up = false;
        if (t - 0.2).abs() < 1e-9 { inp.shift_up = true; }
        inp.throttle = if t > 0.5 { 1.0 } else { 0.0 };
        let tm = *v.telemetry();
        if tm.engine_rpm > 6800.0 && tm.engaged_gear >= 1 && t - last > 0.3 { inp.shift_up = true; last = t; }
        v.step(&inp, dt).unwrap_or_else(|e| panic!("{t}: {e}"));
        for e in v.events() { println!("{:.4} {:?}", e.time, e.kind); }
        let tm = v.telemetry();
        if (t > 2.81 && t < 2.93 && k % 5 == 0) || k % 1000 == 0 {
            println!("t={:.2} rpm={:.0} thr={:.2} gear={}/{} v={:.2} cl slip={:.1} T={:.0} sl={:.4} {:.4} {:.4} slip={:.3} Fx={:.0} {:.0}",
              tm.time, tm.engine_rpm, tm.throttle, tm.selected_gear, tm.engaged_gear, tm.speed, tm.clutch_slip, tm.clutch_torque, tm.sleeves[0], tm.sleeves[1], tm.sleeves[2], tm.tyre_slip[2], tm.tyre_force[2], tm.tyre_force[3]);
        }
    }
    println!("{:?}", v.simulation().stats());
}
