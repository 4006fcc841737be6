//! Runs a scenario many times at dt = 1 ms; a target for profilers
//! (`cargo run --release -p driveline_tools --bin profile_step -- CoupledClutches 200`; a third argument
//! `energy` keeps the energy ledger on, as `Simulation::new` does).

use driveline_core::{IntegrationParameters, Scenario, Simulation};
use std::path::Path;

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "CoupledClutches".into());
    let reps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let track_energy = args.next().is_some_and(|a| a == "energy");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/scenarios/msl").join(format!("{name}.ron"));
    let (sc, net) = Scenario::load_network(&path).expect("scenario");
    let fresh = Simulation::with_parameters(net, IntegrationParameters { track_energy, ..Default::default() });
    let steps = (sc.t_end / 1e-3).round() as usize;
    let start = std::time::Instant::now();
    let mut checksum = 0.0;
    for _ in 0..reps {
        let mut sim = fresh.clone();
        for k in 1..=steps {
            sim.step(k as f64 * 1e-3 - sim.time()).expect("step");
        }
        checksum += sim.speeds()[0];
        if checksum.is_nan() {
            println!("{:?}", sim.stats());
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / (reps * steps) as f64;
    let mut s = fresh.clone();
    for k in 1..=steps {
        s.step(k as f64 * 1e-3 - s.time()).expect("step");
    }
    println!("{:?}", s.stats());
    println!("{name}: {ns:.0} ns per step over {} steps (checksum {checksum})", reps * steps);
}
