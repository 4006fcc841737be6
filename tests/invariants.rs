//! Contracts of the solver beyond accuracy: the energy ledger closes, runs are bitwise
//! deterministic, and stepping does not touch the heap after the first step.

mod common;
use common::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;
thread_local! {
    // Per thread, so tests running in parallel do not count each other's allocations.
    static COUNT: Cell<usize> = const { Cell::new(0) };
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if ARMED.with(Cell::get) {
            COUNT.with(|c| c.set(c.get() + 1));
        }
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SCENARIOS: [&str; 20] = [
    "CoupledClutches",
    "SimpleGearShift",
    "First",
    "FirstGrounded",
    "Friction",
    "Backlash",
    "OneWayClutch",
    "OneWayClutchDisengaged",
    "ElasticBearing",
    "RollingWheel",
    "LossyGearDemo1",
    "LossyGearDemo2",
    "LossyGearDemo3",
    "ElasticClutchEngagement",
    "KinematicClutchShift",
    "SpeedSource",
    "PositionSource",
    "ParallelClutches",
    "EngineRunUp",
    "ConverterLockUp",
];

#[test]
fn energy_ledger_closes() {
    for name in SCENARIOS {
        let (sc, mut sim) = load(name);
        let dt = 1e-3;
        let steps = (sc.t_end / dt).round() as usize;
        for k in 1..=steps {
            sim.step(k as f64 * dt - sim.time()).unwrap();
        }
        let e = sim.energy();
        // Gauss collocation integrates the power balance exactly; what remains is rounding
        // accumulated over thousands of steps (and the Newton tolerance for nonlinear loads).
        let rel = e.residual().abs() / e.scale();
        println!("{name}: energy residual {:e} J, relative {rel:e}, dissipated {} J", e.residual(), e.dissipated);
        assert!(rel < 1e-9, "{name}: residual {} of scale {} ({rel:e})", e.residual(), e.scale());
        assert!(e.dissipated >= -1e-12, "{name}: negative dissipation {}", e.dissipated);
    }
}

#[test]
fn runs_are_bitwise_deterministic() {
    for name in SCENARIOS {
        let probe = |s: &driveline::core::Simulation| {
            let mut v: Vec<f64> = s.angles().to_vec();
            v.extend_from_slice(s.speeds());
            v
        };
        let (_, a) = run(name, 1e-3, 1.0, probe);
        let (_, b) = run(name, 1e-3, 1.0, probe);
        for (x, y) in a.v.iter().zip(&b.v) {
            assert!(x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()), "{name} differs");
        }
        assert_eq!(a.events, b.events);
    }
}

#[test]
fn stepping_does_not_allocate() {
    for name in SCENARIOS {
        let (sc, mut sim) = load(name);
        sim.step(1e-3).unwrap();
        COUNT.with(|c| c.set(0));
        ARMED.with(|a| a.set(true));
        let steps = (sc.t_end / 1e-3).round() as usize;
        let mut mode_changes = 0;
        for k in 2..=steps {
            sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
            mode_changes += sim.events().len();
        }
        ARMED.with(|a| a.set(false));
        // Mode changes, events and break-aways all happen in this window.
        assert_eq!(COUNT.with(Cell::get), 0, "{name} allocated while stepping");
        assert!(
            mode_changes > 0
                || [
                    "First",
                    "FirstGrounded",
                    "ElasticBearing",
                    "RollingWheel",
                    "Backlash",
                    "SpeedSource",
                    "PositionSource"
                ]
                .contains(&name),
            "{name}"
        );
    }
}

#[test]
fn a_snapshot_continues_bit_for_bit() {
    // A Simulation is its own snapshot: clone it mid-run (inside a slipping phase, with cached
    // modes), run both on, and they stay bitwise equal.
    for name in ["CoupledClutches", "LossyGearDemo2", "Backlash"] {
        let (_, mut sim) = load(name);
        for k in 1..=350 {
            sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        }
        let mut copy = sim.clone();
        for k in 351..=700 {
            sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
            copy.step(k as f64 * 1e-3 - copy.time()).unwrap();
            assert_eq!(sim.events(), copy.events(), "{name}");
        }
        assert!(sim.speeds().iter().zip(copy.speeds()).all(|(a, b)| a.to_bits() == b.to_bits()), "{name}");
        assert!(sim.angles().iter().zip(copy.angles()).all(|(a, b)| a.to_bits() == b.to_bits()), "{name}");
    }
}

/// FNV-1a over the bits of every angle and speed after every step of a scripted run.
fn golden_hash(names: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for name in names {
        let (sc, mut sim) = load(name);
        let steps = (sc.t_end / 1e-3).round() as usize;
        for k in 1..=steps {
            sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
            for v in sim.angles().iter().chain(sim.speeds()) {
                for byte in v.to_bits().to_le_bytes() {
                    h ^= byte as u64;
                    h = h.wrapping_mul(0x100_0000_01b3);
                }
            }
        }
    }
    h
}

#[test]
fn golden_hash_of_a_scripted_run() {
    // Pins the numerics bit for bit: any change to the solver's arithmetic changes this value.
    // When a change is intended, rerun with `-- --nocapture`, check the reference tests still
    // pass, and update the constant in the same commit (saying why).
    let h = golden_hash(&["CoupledClutches", "SimpleGearShift", "LossyGearDemo2", "Backlash"]);
    println!("golden hash {h:#018x}");
    assert_eq!(h, GOLDEN, "the numerics changed (golden hash {h:#018x})");
}

const GOLDEN: u64 = 0xd181_8711_1c9d_11bb;

/// A scripted drive of the manual road car: first gear, a launch, a shift to second, a stop.
fn scripted_drive(mut each: impl FnMut(&driveline::core::Vehicle, usize)) -> driveline::core::Vehicle {
    use driveline::core::{DriverInput, Vehicle};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/nissan_350z.ron");
    let mut v = Vehicle::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut input = DriverInput { clutch: 1.0, gear: 1, ..Default::default() };
    for k in 0..9000 {
        let t = k as f64 * 1e-3;
        input.clutch = if t < 1.2 { 1.0 } else { (1.0 - (t - 1.2) / 1.0).max(0.0) };
        input.throttle = if t < 1.2 { 0.0 } else { 0.4 };
        if (4.5..5.4).contains(&t) {
            input.gear = 2;
            input.clutch = 1.0;
            input.throttle = 0.0;
        }
        if t >= 7.0 {
            input.throttle = 0.0;
            input.brake = 0.8;
            input.clutch = 1.0;
        }
        v.step(&input, 1e-3).unwrap();
        each(&v, k);
    }
    v
}

#[test]
fn vehicle_energy_ledger_closes() {
    let v = scripted_drive(|_, _| {});
    let e = v.simulation().energy();
    let rel = e.residual().abs() / e.scale();
    println!("vehicle: residual {:e} J of {:e} J ({rel:e}), dissipated {} J", e.residual(), e.scale(), e.dissipated);
    // Engine map, tyres and speed-dependent friction iterate Newton to 1e-10 (the ledger books
    // the last iterate's forces: ~3e-11 relative here); lock impacts and limit steps are
    // booked exactly; the rest is rounding over 9000 steps.
    assert!(rel < 1e-9, "residual {} J of {} J", e.residual(), e.scale());
    assert!(e.dissipated > 0.0);
}

#[test]
fn vehicle_runs_are_bitwise_deterministic() {
    let mut a = Vec::new();
    let mut b = Vec::new();
    let probe = |v: &driveline::core::Vehicle, out: &mut Vec<u64>| {
        let t = v.telemetry();
        for x in [t.engine_rpm, t.clutch_torque, t.speed, t.distance, t.clutch_temperature]
            .iter()
            .chain(&t.tyre_force)
            .chain(&t.sleeves)
        {
            out.push(x.to_bits());
        }
    };
    scripted_drive(|v, _| probe(v, &mut a));
    scripted_drive(|v, _| probe(v, &mut b));
    assert!(a == b, "two runs of the same drive differ");
}

#[test]
fn vehicle_steps_do_not_allocate() {
    // Armed after the first step: the launch, the shift with its synchroniser and the stop all
    // happen inside the window.
    let mut events = 0;
    scripted_drive(|v, k| {
        if k == 0 {
            COUNT.with(|c| c.set(0));
            ARMED.with(|a| a.set(true));
        }
        events += v.events().len();
        if k == 8999 {
            ARMED.with(|a| a.set(false));
        }
    });
    assert_eq!(COUNT.with(Cell::get), 0, "a vehicle step allocated");
    assert!(events > 5, "the drive should shift and lock: {events} events");
}

/// A scripted drive of the 8HP sedan: a garage shift into D, a full-throttle launch through
/// the first upshifts (clutch-to-clutch, with lock-up), lift-off and a stop.
fn scripted_automatic_drive(mut each: impl FnMut(&driveline::core::Vehicle, usize)) -> driveline::core::Vehicle {
    use driveline::core::automatic::Selector;
    use driveline::core::{DriverInput, Vehicle};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron");
    let mut v = Vehicle::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut input = DriverInput { selector: Selector::Drive, brake: 1.0, ..Default::default() };
    for k in 0..14000 {
        let t = k as f64 * 1e-3;
        input.brake = if !(1.0..9.0).contains(&t) { 0.6 } else { 0.0 };
        input.throttle = if (1.0..9.0).contains(&t) { 1.0 } else { 0.0 };
        v.step(&input, 1e-3).unwrap();
        each(&v, k);
    }
    v
}

#[test]
fn automatic_vehicle_keeps_the_contracts() {
    // Energy: converter, lock-up, five shift elements, park pawl and tyres all booked.
    let v = scripted_automatic_drive(|_, _| {});
    let e = v.simulation().energy();
    let rel = e.residual().abs() / e.scale();
    println!("automatic: residual {:e} J of {:e} J ({rel:e}), dissipated {} J", e.residual(), e.scale(), e.dissipated);
    assert!(rel < 1e-9, "residual {} J of {} J", e.residual(), e.scale());
    // Determinism: two runs, bit for bit.
    let mut a = Vec::new();
    let mut b = Vec::new();
    let probe = |v: &driveline::core::Vehicle, out: &mut Vec<u64>| {
        let t = v.telemetry();
        out.extend([t.engine_rpm, t.turbine_rpm, t.speed, t.converter_torque].map(f64::to_bits));
        out.extend(t.elements.iter().map(|e| e.torque.to_bits()));
    };
    scripted_automatic_drive(|v, _| probe(v, &mut a));
    scripted_automatic_drive(|v, _| probe(v, &mut b));
    assert!(a == b, "two runs of the same drive differ");
    // No allocation after the first step, shifts included.
    let mut shifts = 0;
    scripted_automatic_drive(|v, k| {
        if k == 0 {
            COUNT.with(|c| c.set(0));
            ARMED.with(|a| a.set(true));
        }
        shifts += v
            .events()
            .iter()
            .filter(|e| matches!(e.kind, driveline::core::vehicle::VehicleEventKind::ShiftCompleted { .. }))
            .count();
        if k == 13999 {
            ARMED.with(|a| a.set(false));
        }
    });
    assert_eq!(COUNT.with(Cell::get), 0, "an automatic vehicle step allocated");
    assert!(shifts >= 3, "the drive should shift: {shifts} shifts");
}
