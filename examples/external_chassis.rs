//! Coupling Driveline to a game's own chassis physics.
//!
//! The game owns the car body (here: a point mass with drag, integrated by the "game" at its
//! own fixed step). Every step it tells the driveline the speed of the ground under each wheel
//! and the wheel's normal load, steps the driveline, and applies the tyre forces it reads back.
//! Wheels, brakes, clutch, gearbox and differential stay in Driveline's coupled solve.
//!
//! Run with `cargo run --release --example external_chassis`.

use driveline::core::DriverInput;
use driveline::core::vehicle::{Vehicle, VehicleSpec};
use std::path::Path;

fn main() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/nissan_350z.ron");
    let text = std::fs::read_to_string(&path).expect("read the vehicle file");
    let spec: VehicleSpec = Vehicle::parse(&text, &path.display().to_string()).unwrap_or_else(|e| panic!("{e}"));
    let mass = spec.body.mass;
    let drag = 0.5 * spec.body.air_density * spec.body.drag_area;
    let weight = [0.53, 0.53, 0.47, 0.47].map(|share| share * mass * 9.80665 / 2.0);
    let mut car = Vehicle::new_external(spec).unwrap_or_else(|e| panic!("{e}"));

    // The game's chassis state.
    let (mut v, mut a) = (0.0f64, 0.0f64);
    let dt = 1.0 / 240.0;
    let mut input = DriverInput { clutch: 1.0, gear: 1, ..Default::default() };
    for step in 0..(240 * 12) {
        let t = step as f64 * dt;
        // A driver: first gear in, launch over a second, shift to second at 5 s.
        input.clutch = if t < 1.0 { 1.0 } else { (1.0 - (t - 1.0)).max(0.0) };
        input.throttle = if t < 1.0 { 0.0 } else { 0.4 };
        if (5.0..5.6).contains(&t) {
            input.gear = 2;
            input.clutch = 1.0;
            input.throttle = 0.0;
        }
        // 1. Tell the driveline about the ground: speed, the chassis' acceleration, load.
        for k in 0..4 {
            car.set_wheel_contact(k, v, a, weight[k]);
        }
        // 2. Step it.
        car.step(&input, dt).expect("driveline step");
        // 3. Apply the tyre forces to the game's chassis.
        let tm = car.telemetry();
        let fx: f64 = tm.tyre_force.iter().sum();
        a = (fx - drag * v * v.abs()) / mass;
        v += dt * a;
        if step % 240 == 0 {
            println!(
                "t {:5.2} s  gear {:2}  engine {:5.0} rpm  v {:5.2} m/s  Fx {:7.1} N  drive torque rear {:7.1} {:7.1} N m",
                t, tm.engaged_gear, tm.engine_rpm, v, fx, tm.drive_torque[2], tm.drive_torque[3]
            );
        }
    }
}
