//! Every shipped vehicle drives the same at game steps as at 1 ms: over UDDS, HWFET and US06
//! with the driver model at 4 ms, 1/120 s, 1/60 s and 1/30 s, the distance, the speed error,
//! the shift count and the first 1-2 upshift (its duration and its synchroniser's energy) stay
//! within the bounds below of the 1 ms run, with no stall.

use driveline::core::Vehicle;
use driveline::core::vehicle::VehicleEventKind;
use driveline::core::vehicle::driver::{Cycle, Driver, DriverParams, drive_cycle};
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// What a run is compared by.
#[derive(Debug, Clone, Copy)]
struct Run {
    distance_km: f64,
    rms_kmh: f64,
    shifts: u32,
    stalls: u32,
    /// The first 1-2 upshift: duration, s, and the energy the second gear's synchroniser
    /// dissipated during it, J (`None` without a synchroniser).
    upshift: Option<(f64, Option<f64>)>,
}

fn drive(file: &Path, cycle: &Cycle, dt: f64) -> Run {
    let mut car = Vehicle::load(file).unwrap_or_else(|e| panic!("{e}"));
    let mut driver = Driver::new(car.spec(), DriverParams::default());
    let mut upshift = None;
    let mut started: Option<Option<f64>> = None;
    let summary = drive_cycle(&mut car, cycle, &mut driver, dt, |v, _| {
        for e in v.events() {
            match e.kind {
                VehicleEventKind::ShiftStarted { from: 1, to: 2 } if upshift.is_none() => {
                    started = Some(v.synchro_energy(2));
                }
                VehicleEventKind::ShiftCompleted { gear: 2, duration, .. } if upshift.is_none() => {
                    if let Some(e0) = started {
                        let energy = e0.and_then(|e0| v.synchro_energy(2).map(|e1| e1 - e0));
                        upshift = Some((duration, energy));
                    }
                }
                _ => {}
            }
        }
    })
    .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    Run {
        distance_km: summary.distance_km,
        rms_kmh: summary.rms_speed_error_kmh,
        shifts: summary.shifts,
        stalls: summary.stalls,
        upshift,
    }
}

/// Checks `run` at `dt` against the 1 ms reference; returns what is out of bounds.
fn compare(name: &str, dt: f64, reference: &Run, run: &Run) -> Vec<String> {
    let mut bad = Vec::new();
    let at = format!("{name} at {:.2} ms", dt * 1e3);
    if run.stalls > 0 {
        bad.push(format!("{at}: {} stalls", run.stalls));
    }
    if (run.distance_km / reference.distance_km - 1.0).abs() > 0.01 {
        bad.push(format!("{at}: {:.3} km against {:.3} km", run.distance_km, reference.distance_km));
    }
    if (run.rms_kmh - reference.rms_kmh).abs() > 0.3 {
        bad.push(format!("{at}: rms {:.2} km/h against {:.2}", run.rms_kmh, reference.rms_kmh));
    }
    if (run.shifts as f64 / reference.shifts as f64 - 1.0).abs() > 0.1 {
        bad.push(format!("{at}: {} shifts against {}", run.shifts, reference.shifts));
    }
    match (reference.upshift, run.upshift) {
        (Some((d0, e0)), Some((d, e))) => {
            if (d / d0 - 1.0).abs() > 0.1 {
                bad.push(format!("{at}: 1-2 upshift {:.0} ms against {:.0} ms", d * 1e3, d0 * 1e3));
            }
            if let (Some(e0), Some(e)) = (e0, e)
                && (e / e0 - 1.0).abs() > 0.1
            {
                bad.push(format!("{at}: 1-2 synchroniser {e:.0} J against {e0:.0} J"));
            }
        }
        (None, None) => {}
        (r, g) => bad.push(format!("{at}: 1-2 upshift {g:?} against {r:?}")),
    }
    bad
}

#[test]
fn every_shipped_vehicle_drives_the_same_at_game_steps() {
    let mut files: Vec<_> =
        std::fs::read_dir(root().join("assets/vehicles")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 4);
    let cycles: Vec<Cycle> = ["udds", "hwfet", "us06"]
        .iter()
        .map(|c| {
            let path = root().join(format!("assets/cycles/{c}.csv"));
            Cycle::parse(&std::fs::read_to_string(&path).unwrap(), c).unwrap()
        })
        .collect();
    let steps = [4e-3, 1.0 / 120.0, 1.0 / 60.0, 1.0 / 30.0];
    // One thread per vehicle and cycle: the runs are independent, and each is deterministic.
    let pairs: Vec<(&Path, &Cycle)> = files.iter().flat_map(|f| cycles.iter().map(move |c| (f.as_path(), c))).collect();
    let results: Vec<(String, Run, Vec<(f64, Run)>)> = std::thread::scope(|s| {
        let handles: Vec<_> = pairs
            .iter()
            .map(|&(file, cycle)| {
                s.spawn(move || {
                    let name = format!("{} over {}", file.file_name().unwrap().to_string_lossy(), cycle.name);
                    let reference = drive(file, cycle, 1e-3);
                    let runs = steps.iter().map(|&dt| (dt, drive(file, cycle, dt))).collect();
                    (name, reference, runs)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut bad = Vec::new();
    for (name, reference, runs) in &results {
        println!("{name}: 1 ms {reference:?}");
        assert_eq!(reference.stalls, 0, "{name} stalls at 1 ms");
        for (dt, run) in runs {
            println!("    {:6.2} ms {run:?}", dt * 1e3);
            bad.extend(compare(name, *dt, reference, run));
        }
    }
    assert!(bad.is_empty(), "out of bounds:\n{}", bad.join("\n"));
}
