use driveline_core::*;
fn main() {
    let (_, net) = Scenario::load_network(std::path::Path::new("assets/scenarios/msl/CoupledClutches.ron")).unwrap();
    let mut sim = Simulation::new(net);
    for k in 1..=1100 {
        let t = k as f64 * 1e-3;
        sim.step(t - sim.time()).unwrap();
        if (0.826..0.834).contains(&t) { println!("{t:.4} tau1={:.6} modes={:?}", sim.element_torque(3), sim.friction_modes()); }
        for e in sim.events() { println!("  ev {:?}", e); }
    }
}
