//! Replays vehicle steps from a saved snapshot (`FUZZ_TRACE=dir fuzz --case N` writes the state
//! before each step): `replay_snapshot vehicle.ron snapshot.json dt n throttle brake clutch`
//! [starter gear shift_up]` steps `n` times (with the starter held and shift up requested
//! when those are 1, in `gear`) and prints the speeds, the modes that change, and the element torques that
//! are not finite. With `REPLAY_INPUT` set to a JSON `DriverInput`, that input is used instead
//! of the positional ones (grade and selector included). With `REPLAY_SAVE_AT=k`, the state
//! before step `k` (from 0) is written to `snapshot_at_k.json`.

use driveline_core::{DriverInput, Vehicle, VehicleSnapshot};
use std::path::Path;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let mut v = Vehicle::load(Path::new(&a[1])).expect("vehicle");
    let snap: VehicleSnapshot = serde_json::from_str(&std::fs::read_to_string(&a[2]).expect("snapshot")).expect("json");
    v.restore(&snap).expect("restore");
    let num = |k: usize| a.get(k).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    let (dt, n) = (num(3), num(4) as usize);
    let positional = DriverInput {
        throttle: num(5),
        brake: num(6),
        clutch: num(7),
        starter: num(8) == 1.0,
        gear: num(9) as i32,
        shift_up: num(10) == 1.0,
        selector: driveline_core::automatic::Selector::Drive,
        ..Default::default()
    };
    let input = match std::env::var("REPLAY_INPUT") {
        Ok(json) => serde_json::from_str(&json).expect("REPLAY_INPUT: a JSON DriverInput"),
        Err(_) => positional,
    };
    let save_at = std::env::var("REPLAY_SAVE_AT").ok().and_then(|k| k.parse::<usize>().ok());
    for k in 0..n {
        if save_at == Some(k) {
            let json = serde_json::to_string(&v.snapshot()).expect("json");
            std::fs::write(format!("snapshot_at_{k}.json"), json).expect("write");
        }
        let started = std::time::Instant::now();
        let r = v.step(&input, dt);
        println!("   took {:?}", started.elapsed());
        let t = v.telemetry();
        println!(
            "{r:?} t {:.6} v {:.4e} wheels {:?} brake {:?} rpm {:.1}",
            t.time, t.speed, t.wheel_speed, t.brake_torque, t.engine_rpm
        );
        let sim = v.simulation();
        println!("   stats {:?}", sim.stats());
        for e in sim.events() {
            println!("   {:.6} {} {:?} -> {:?}", e.time, sim.network().elements[e.element].name, e.from, e.to);
        }
    }
}
