//! Every shipped vehicle follows the UDDS city cycle with the driver model: speed error, stalls,
//! shifts (the `driveline run` acceptance).

use driveline::core::Vehicle;
use driveline::core::vehicle::driver::{Cycle, Driver, DriverParams, drive_cycle};
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_shipped_vehicle_follows_udds() {
    let cycle_path = root().join("assets/cycles/udds.csv");
    let cycle = Cycle::parse(&std::fs::read_to_string(&cycle_path).unwrap(), "udds").unwrap();
    let mut files: Vec<_> =
        std::fs::read_dir(root().join("assets/vehicles")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 4);
    // One thread per vehicle: the runs are independent (and each is deterministic).
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = files
            .iter()
            .map(|f| {
                let cycle = &cycle;
                s.spawn(move || {
                    let mut car = Vehicle::load(f).unwrap_or_else(|e| panic!("{e}"));
                    let mut driver = Driver::new(car.spec(), DriverParams::default());
                    drive_cycle(&mut car, cycle, &mut driver, 1e-3, |_, _| {}).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &results {
        println!(
            "{}: rms {:.2} km/h, max {:.1} km/h, {:.2} of {:.2} km, {} shifts, {} stalls, {:.0}x real time",
            r.vehicle,
            r.rms_speed_error_kmh,
            r.max_speed_error_kmh,
            r.distance_km,
            r.cycle_distance_km,
            r.shifts,
            r.stalls,
            r.realtime_factor
        );
    }
    for r in &results {
        assert_eq!(r.stalls, 0, "{} stalled", r.vehicle);
        // The bound.
        assert!(r.rms_speed_error_kmh < 2.0, "{}: rms {:.2} km/h", r.vehicle, r.rms_speed_error_kmh);
        // Following the trace means covering its distance (1 % for the lag of a human driver).
        assert!((r.distance_km / r.cycle_distance_km - 1.0).abs() < 0.01, "{}: {} km", r.vehicle, r.distance_km);
        assert!(r.shifts > 10, "{}: {} shifts", r.vehicle, r.shifts);
    }
}
