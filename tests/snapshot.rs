//! Snapshots: a vehicle restored from a snapshot continues bit for bit, for every shipped vehicle,
//! through shifts, at a game step and at 1 ms, also after a serde round trip through text (RON,
//! JSON) and binary (postcard), and when restored into a vehicle that had gone elsewhere. The
//! comparison is exact: the whole state after each step (every word a snapshot holds) and the
//! telemetry.

use driveline::core::vehicle::driver::{Cycle, Driver, DriverParams};
use driveline::core::{DriverInput, SnapshotError, Vehicle, VehicleSnapshot};
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn vehicle(name: &str) -> Vehicle {
    Vehicle::load(&root().join("assets/vehicles").join(name)).unwrap_or_else(|e| panic!("{e}"))
}

fn cycle() -> Cycle {
    let path = root().join("assets/cycles/us06.csv");
    Cycle::parse(&std::fs::read_to_string(&path).expect("US06"), "us06.csv").expect("US06")
}

/// Steps `car` through `inputs`, returning the full state after each step.
fn replay(car: &mut Vehicle, inputs: &[DriverInput], dt: f64) -> Vec<(VehicleSnapshot, String)> {
    inputs
        .iter()
        .map(|i| {
            car.step(i, dt).expect("step");
            (car.snapshot(), format!("{:?}", car.telemetry()))
        })
        .collect()
}

/// Drives `name` over US06 for `seconds`; every `every` frames takes a snapshot, records the
/// next `frames` steps, and replays them from the snapshot in `other` (a vehicle of the same
/// description somewhere else), through `trip`. Returns the number of rollbacks checked.
fn rollbacks(
    name: &str,
    dt: f64,
    seconds: f64,
    every: usize,
    frames: usize,
    trip: &dyn Fn(&VehicleSnapshot) -> VehicleSnapshot,
) -> usize {
    let cycle = cycle();
    let mut car = vehicle(name);
    let mut driver = Driver::new(car.spec(), DriverParams::default());
    // The other vehicle: same description, driven flat out instead (its state, modes,
    // compiled modes and caches are another history's).
    let mut other = vehicle(name);
    let mut flat_out = DriverInput { throttle: 1.0, ..DriverInput::default() };
    flat_out.selector = driveline::core::automatic::Selector::Drive;
    flat_out.gear = 1;
    let mut checked = 0;
    let steps = (seconds / dt) as usize;
    let mut k = 0;
    while k < steps {
        if k % every == 0 && k > 0 {
            let snap = trip(&car.snapshot());
            let mut d = driver.clone();
            let inputs: Vec<DriverInput> = (0..frames)
                .map(|_| {
                    let i = d.input(&cycle, car.telemetry(), dt);
                    car.step(&i, dt).expect("step");
                    i
                })
                .collect();
            driver = d;
            // What the original did after the snapshot, replayed from it.
            let mut again = car.clone();
            again.restore(&snap).expect("restore");
            let expected = replay(&mut again, &inputs, dt);
            other.step(&flat_out, dt).expect("step");
            other.restore(&snap).unwrap_or_else(|e| panic!("{name}: {e}"));
            let got = replay(&mut other, &inputs, dt);
            for (f, (e, g)) in expected.iter().zip(&got).enumerate() {
                assert_eq!(
                    e.1,
                    g.1,
                    "{name} at {dt} s, t = {}: telemetry differs {} frames after the restore",
                    snap.time,
                    f + 1
                );
                assert!(
                    e.0 == g.0,
                    "{name} at {dt} s, t = {}: state differs {} frames after the restore: {:?}",
                    snap.time,
                    f + 1,
                    differing(&again, &e.0, &g.0)
                );
            }
            // And the original itself, stepped on, is where the replay ended.
            assert!(
                car.snapshot() == expected.last().expect("frames").0,
                "{name}: the replay left the original's path"
            );
            checked += 1;
            k += frames;
            continue;
        }
        let i = driver.input(&cycle, car.telemetry(), dt);
        car.step(&i, dt).expect("step");
        k += 1;
    }
    checked
}

/// The fields in which two states differ.
fn differing(car: &Vehicle, a: &VehicleSnapshot, b: &VehicleSnapshot) -> Vec<&'static str> {
    let layout = car.state_layout();
    let mut out: Vec<&str> = Vec::new();
    for (i, _) in a.state_words().iter().zip(b.state_words()).enumerate().filter(|(_, (p, q))| p != q) {
        let l = layout.iter().rev().find(|l| l.0 <= i).map_or("?", |l| l.1);
        if !out.contains(&l) {
            out.push(l);
        }
    }
    out
}

const VEHICLES: [&str; 4] = ["nissan_350z.ron", "sedan_8hp.ron", "diesel_truck.ron", "race_sequential.ron"];

#[test]
fn every_vehicle_rolls_back_bit_for_bit_at_60_hz() {
    for name in VEHICLES {
        let n = rollbacks(name, 1.0 / 60.0, 60.0, 23, 8, &|s| s.clone());
        assert!(n > 100, "{name}: {n} rollbacks");
    }
}

#[test]
fn every_vehicle_rolls_back_bit_for_bit_at_other_game_steps() {
    for dt in [1.0 / 30.0, 1.0 / 120.0, 4e-3] {
        for name in VEHICLES {
            let n = rollbacks(name, dt, 40.0, 19, 8, &|s| s.clone());
            assert!(n > 50, "{name}: {n} rollbacks");
        }
    }
}

#[test]
fn every_vehicle_rolls_back_bit_for_bit_at_1_ms() {
    for name in VEHICLES {
        let n = rollbacks(name, 1e-3, 25.0, 301, 8, &|s| s.clone());
        assert!(n > 50, "{name}: {n} rollbacks");
    }
}

/// The size of the state, by field, of the 8HP sedan (run with `--nocapture` to see it).
#[test]
fn snapshot_size() {
    let mut car = vehicle("sedan_8hp.ron");
    for k in 0..600 {
        car.step(&driveline::core::vehicle::driver::first_to_third(k as f64 / 60.0, 1.0), 1.0 / 60.0).expect("step");
    }
    let snap = car.snapshot();
    let layout = car.state_layout();
    let mut sizes: Vec<(usize, &str)> = Vec::new();
    for (k, &(at, name)) in layout.iter().enumerate() {
        let end = layout.get(k + 1).map_or(snap.state_words().len(), |l| l.0);
        match sizes.iter_mut().find(|s| s.1 == name) {
            Some(s) => s.0 += end - at,
            None => sizes.push((end - at, name)),
        }
    }
    sizes.sort_by_key(|s| std::cmp::Reverse(s.0));
    let binary = postcard::to_stdvec(&snap).expect("postcard").len();
    println!(
        "8HP sedan snapshot: {} words, {binary} bytes in postcard; largest fields {:?}",
        snap.state_words().len(),
        &sizes[..12]
    );
    assert!(binary < 64 * 1024);
}

#[test]
fn snapshots_survive_text_and_binary_round_trips() {
    let ron_trip = |s: &VehicleSnapshot| -> VehicleSnapshot {
        ron::from_str(&ron::to_string(s).expect("to RON")).expect("from RON")
    };
    let json_trip = |s: &VehicleSnapshot| -> VehicleSnapshot {
        serde_json::from_str(&serde_json::to_string(s).expect("to JSON")).expect("from JSON")
    };
    let postcard_trip = |s: &VehicleSnapshot| -> VehicleSnapshot {
        postcard::from_bytes(&postcard::to_stdvec(s).expect("to postcard")).expect("from postcard")
    };
    for name in ["sedan_8hp.ron", "nissan_350z.ron"] {
        assert!(rollbacks(name, 1.0 / 60.0, 30.0, 97, 8, &ron_trip) > 10);
        assert!(rollbacks(name, 1.0 / 60.0, 30.0, 97, 8, &json_trip) > 10);
        assert!(rollbacks(name, 1.0 / 60.0, 30.0, 97, 8, &postcard_trip) > 10);
    }
}

/// The rollback: step, snapshot, step 8 frames, restore, step the same 8 frames: equal.
#[test]
fn rollback_in_place_repeats_the_frames() {
    let mut car = vehicle("sedan_8hp.ron");
    let dt = 1.0 / 60.0;
    let inputs: Vec<DriverInput> =
        (0..600).map(|k| driveline::core::vehicle::driver::first_to_third(k as f64 * dt, 1.0)).collect();
    for i in &inputs[..300] {
        car.step(i, dt).expect("step");
    }
    let snap = car.snapshot();
    let first = replay(&mut car, &inputs[300..308], dt);
    car.restore(&snap).expect("restore");
    let second = replay(&mut car, &inputs[300..308], dt);
    assert!(first == second);
    assert!(first[7].0.time > snap.time);
}

#[test]
fn a_snapshot_of_another_description_is_refused() {
    let car = vehicle("sedan_8hp.ron");
    let mut other = vehicle("nissan_350z.ron");
    let before = other.snapshot();
    let err = other.restore(&car.snapshot()).expect_err("another vehicle");
    assert!(matches!(err, SnapshotError::OtherVehicle { .. }), "{err}");
    assert!(other.snapshot() == before, "a refused restore changed the vehicle");
    // The same file with one parameter changed is another description.
    let mut spec = car.spec().clone();
    spec.driveline.final_drive *= 1.01;
    let mut edited = Vehicle::new(spec).expect("builds");
    assert!(matches!(edited.restore(&car.snapshot()), Err(SnapshotError::OtherVehicle { .. })));
    // A damaged snapshot (words cut off) is refused and leaves the vehicle as it was.
    let mut same = vehicle("sedan_8hp.ron");
    same.step(&DriverInput::default(), 0.01).expect("step");
    let before = same.snapshot();
    let mut cut = car.snapshot();
    let text = serde_json::to_string(&cut).expect("json");
    let half = text.replacen("\"state\":\"", "\"state\":\"0000000000000000", 1);
    cut = serde_json::from_str(&half).expect("still hex");
    assert!(matches!(same.restore(&cut), Err(SnapshotError::Damaged(_))));
    assert!(same.snapshot() == before, "a refused restore changed the vehicle");
}

/// The driver model is not part of the vehicle: it saves beside the snapshot with serde, and a
/// run restored from both (after a JSON round trip of each) drives the same cycle bit for bit.
#[test]
fn the_driver_model_saves_beside_the_snapshot() {
    let cycle = cycle();
    let dt = 1.0 / 60.0;
    let mut car = vehicle("nissan_350z.ron");
    let mut driver = Driver::new(car.spec(), DriverParams::default());
    // Into the cycle, with shifts behind (the driver's integral and shift state are in use).
    for _ in 0..1500 {
        let i = driver.input(&cycle, car.telemetry(), dt);
        car.step(&i, dt).expect("step");
    }
    let saved_car = serde_json::to_string(&car.snapshot()).expect("serializes");
    let saved_driver = serde_json::to_string(&driver).expect("serializes");
    let run = |car: &mut Vehicle, driver: &mut Driver| {
        (0..600)
            .map(|_| {
                let i = driver.input(&cycle, car.telemetry(), dt);
                car.step(&i, dt).expect("step");
                car.snapshot()
            })
            .collect::<Vec<_>>()
    };
    let expected = run(&mut car, &mut driver);
    let mut again = vehicle("nissan_350z.ron");
    again.restore(&serde_json::from_str(&saved_car).expect("reads")).expect("restores");
    let mut driver_again: Driver = serde_json::from_str(&saved_driver).expect("reads");
    assert!(run(&mut again, &mut driver_again) == expected, "the restored run left the original's path");
    assert_eq!(driver_again, driver);
}
