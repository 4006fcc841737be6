//! Temporary probe (deleted before commit).
use driveline::core::{DriverInput, Vehicle};
use std::path::Path;

fn main() {
    let mut v = Vehicle::load(Path::new("assets/vehicles/nissan_350z.ron")).unwrap_or_else(|e| panic!("{e}"));
    let dt = 1e-3;
    let mut inp = DriverInput { brake: 0.6, grade: 0.2, ..Default::default() };
    let t = std::time::Instant::now();
    for k in 0..200 { v.step(&inp, dt).unwrap(); if k % 20 == 0 { println!("{k} {:.1} ms {:?}", t.elapsed().as_secs_f64()*1e3, v.simulation().stats()); } }
    println!("hold: {:.2} us/step {:?}", t.elapsed().as_secs_f64() / 200.0 * 1e6, v.simulation().stats());
    inp = DriverInput { clutch: 1.0, gear: 3, ..Default::default() };
    let mut v = Vehicle::load(Path::new("assets/vehicles/nissan_350z.ron")).unwrap();
    for _ in 0..1500 { v.step(&inp, dt).unwrap(); }
    inp.clutch = 0.0; inp.throttle = 0.5;
    for _ in 0..3000 { v.step(&inp, dt).unwrap(); }
    let t = std::time::Instant::now();
    for _ in 0..20000 { v.step(&inp, dt).unwrap(); }
    println!("cruise: {:.2} us/step v={:.1} {:?}", t.elapsed().as_secs_f64() / 20000.0 * 1e6, v.telemetry().speed, v.simulation().stats());
}
