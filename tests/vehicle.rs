//! Vehicle behaviour, each shown physically: launches, stalls, blocked dogs, synchroniser
//! timing, dog-box upshifts, limited-slip locking, hill holding and wheelspin.

use driveline::core::vehicle::{VehicleEventKind, WHEELS};
use driveline::core::{DriverInput, FrictionMode, Vehicle};
use std::path::Path;

const DT: f64 = 1e-3;

fn car(file: &str) -> Vehicle {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles").join(file);
    Vehicle::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn element(v: &Vehicle, name: &str) -> usize {
    v.simulation().network().elements.iter().position(|e| e.name == name).unwrap_or_else(|| panic!("no {name}"))
}

/// Steps `v` for `seconds`, letting `driver(t, input)` set the input before each step and
/// `watch(v)` look after it.
fn drive(
    v: &mut Vehicle,
    input: &mut DriverInput,
    seconds: f64,
    mut driver: impl FnMut(f64, &mut DriverInput),
    mut watch: impl FnMut(&Vehicle),
) {
    let n = (seconds / DT).round() as usize;
    for _ in 0..n {
        driver(v.simulation().time(), input);
        v.step(input, DT).unwrap_or_else(|e| panic!("t = {}: {e}", v.simulation().time()));
        watch(v);
    }
}

fn has(v: &Vehicle, pred: impl Fn(&VehicleEventKind) -> bool) -> bool {
    v.events().iter().any(|e| pred(&e.kind))
}

/// Press the clutch, select `gear`, wait until the dogs are in.
fn engage(v: &mut Vehicle, input: &mut DriverInput, gear: i32) {
    input.clutch = 1.0;
    drive(v, input, 0.1, |_, _| {}, |_| {});
    input.gear = gear;
    let mut done = false;
    drive(v, input, 2.0, |_, _| {}, |v| done |= has(v, |k| matches!(k, VehicleEventKind::ShiftCompleted { .. })));
    assert!(done, "gear {gear} did not go in");
}

#[test]
fn clutch_launch_bites_at_the_bite_point_and_locks_once_without_chatter() {
    let mut v = car("nissan_350z.ron");
    let mut input = DriverInput::default();
    engage(&mut v, &mut input, 1);
    let bite = v.spec().clutch.as_ref().unwrap().bite_point;
    // Hold 1800 rpm worth of throttle and let the pedal up over 3 s.
    input.throttle = 0.25;
    let t0 = v.simulation().time();
    let mut first_torque_at = None;
    let mut modes = Vec::new();
    drive(
        &mut v,
        &mut input,
        5.0,
        |t, i| i.clutch = (1.0 - (t - t0) / 3.0).clamp(0.0, 1.0),
        |v| {
            let tm = v.telemetry();
            if first_torque_at.is_none() && tm.clutch_torque != 0.0 {
                first_torque_at = Some(tm.time);
            }
            let m = v.clutch_mode().unwrap();
            if modes.last() != Some(&m) {
                modes.push(m);
            }
        },
    );
    // The plate carries torque from the first step the pedal is above the bite point: the pedal
    // of that step (set at its start) is within one step of travel (1/3000) below the bite point.
    let t1 = first_torque_at.expect("the clutch never carried torque");
    let pedal = 1.0 - (t1 - DT - t0) / 3.0;
    assert!(pedal <= bite && pedal > bite - 1.0 / 3000.0 - 1e-9, "first torque at pedal {pedal}, bite point {bite}");
    // Disc slower than the engine: slides backward, then locks once and stays locked.
    assert_eq!(modes, vec![FrictionMode::Free, FrictionMode::Backward, FrictionMode::Stuck], "{modes:?}");
    let tm = v.telemetry();
    assert!(tm.speed > 3.0, "the car did not move off: {} m/s", tm.speed);
    assert_eq!(tm.clutch_slip, 0.0, "a locked clutch has no slip at all");
    assert!(tm.running);
}

#[test]
fn dumping_the_clutch_at_idle_in_fifth_stalls_the_engine() {
    let mut v = car("nissan_350z.ron");
    let mut input = DriverInput::default();
    engage(&mut v, &mut input, 5);
    let mut stalled = false;
    input.clutch = 0.0;
    drive(&mut v, &mut input, 3.0, |_, _| {}, |v| stalled |= has(v, |k| *k == VehicleEventKind::Stalled));
    let tm = v.telemetry();
    assert!(stalled, "no stall: {} rpm", tm.engine_rpm);
    assert!(!tm.running);
    let stall = v.spec().engine.stall_rpm;
    assert!(tm.engine_rpm < stall, "engine still at {} rpm", tm.engine_rpm);
    // In fifth the engine's inertia moves the car only a few centimetres before it dies.
    assert!(tm.distance < 0.3, "moved {} m", tm.distance);
}

#[test]
fn dog_blocks_at_the_tips_while_the_speed_difference_is_too_high_then_drops_in() {
    let mut v = car("race_sequential.ron");
    // Rev the engine in neutral with the clutch engaged: idler 1 turns at n / 2.92.
    let mut input = DriverInput { throttle: 0.6, ..Default::default() };
    drive(&mut v, &mut input, 0.3, |_, _| {}, |_| {});
    let w_max = v.spec().gearbox.as_ref().unwrap().dog.max_engage_speed;
    let dog1 = element(&v, "dog1");
    let slip = |v: &Vehicle| v.simulation().element_relative(dog1).unwrap().1.abs();
    assert!(slip(&v) > w_max, "set-up: slip {} not above {w_max}", slip(&v));
    // Ask for first and lift off: blocked at the tips until the engine has slowed enough.
    input.throttle = 0.0;
    input.shift_up = true;
    let mut blocked_at = None;
    let mut engaged_at = None;
    drive(
        &mut v,
        &mut input,
        3.0,
        |_, i| i.shift_up = true,
        |v| {
            if blocked_at.is_none() && has(v, |k| *k == VehicleEventKind::ShiftBlocked { gear: 1 }) {
                blocked_at = Some(v.simulation().time());
            }
            if blocked_at.is_some() && engaged_at.is_none() {
                // While blocked the sleeve rides on the tips: it may press into the compliant
                // stop, but never reaches the overlap at which the dogs carry torque.
                let z = v.telemetry().sleeves[0];
                let dog = v.spec().gearbox.as_ref().unwrap().dog;
                if !has(v, |k| *k == VehicleEventKind::DogEngaged { gear: 1 }) {
                    assert!(z < dog.clearance + dog.min_overlap, "sleeve at {z} passed the tips while blocked");
                    assert_eq!(v.simulation().element_torque(dog1), 0.0, "a blocked dog carries no torque");
                }
            }
            if engaged_at.is_none() && has(v, |k| *k == VehicleEventKind::DogEngaged { gear: 1 }) {
                engaged_at = Some((v.simulation().time(), slip(v)));
            }
        },
    );
    let tb = blocked_at.expect("the dog never blocked");
    let (te, _) = engaged_at.expect("the dog never dropped in");
    assert!(te > tb + 0.05, "engaged {te} too soon after blocking at {tb}");
    assert_eq!(v.engaged_gear(), 1);
}

#[test]
fn synchroniser_time_matches_cone_torque_and_reflected_inertia() {
    let mut v = car("nissan_350z.ron");
    let mut input = DriverInput { clutch: 1.0, ..Default::default() };
    drive(&mut v, &mut input, 0.3, |_, _| {}, |_| {});
    let gb = v.spec().gearbox.clone().unwrap();
    let sy = gb.synchro.unwrap();
    let cl = v.spec().clutch.clone().unwrap();
    // Hand calculation. Everything turning with the input shaft, reflected to idler 1
    // (ratio r1): the disc, the damper's input-shaft inertia (0.005 in the layout), every idler.
    let r1 = gb.ratios[0];
    let ratios: Vec<f64> = gb.ratios.iter().copied().chain(gb.reverse).collect();
    let j_in = cl.disc_inertia + 0.005 + ratios.iter().map(|r| gb.idler_inertia / (r * r)).sum::<f64>();
    let j_eq = j_in * r1 * r1;
    // With the sleeve resting on the blocker, the cone's axial force is the shift force.
    let t_cone = sy.mu * gb.shift_force * sy.cone_radius / sy.cone_angle_deg.to_radians().sin();
    let syn = element(&v, "synchro1");
    let dog = element(&v, "dog1");
    input.gear = 1;
    let mut contact: Option<(f64, f64)> = None;
    let mut indexed = None;
    let mut torques = Vec::new();
    drive(
        &mut v,
        &mut input,
        2.0,
        |_, _| {},
        |v| {
            let tau = v.simulation().element_torque(syn).abs();
            torques.push((v.simulation().time(), tau));
            if contact.is_none() && tau > 0.0 {
                contact = Some((v.simulation().time(), v.simulation().element_relative(dog).unwrap().1.abs()));
            }
            if indexed.is_none() && has(v, |k| *k == VehicleEventKind::SynchroIndexed { gear: 1 }) {
                indexed = Some(v.simulation().time());
            }
        },
    );
    let (t0, dw0) = contact.expect("the cone never touched");
    let t1 = indexed.expect("the synchro never indexed");
    let predicted = j_eq * (dw0 - sy.index_speed) / t_cone;
    let measured = t1 - t0;
    println!(
        "sync: dw0 {dw0:.2} rad/s, J_eq {j_eq:.4} kg m2, T_cone {t_cone:.2} N m, predicted {predicted:.4} s, measured {measured:.4} s"
    );
    // The contact force builds up through the stop's compliance in a few ms and the linkage sees
    // speeds one step late: 3 % covers both at this 1 ms step.
    assert!((measured - predicted).abs() < 0.03 * predicted, "measured {measured} s vs predicted {predicted} s");
    // Halfway through, the cone slides with its kinetic torque mu F r / sin(alpha); the sleeve
    // rests on the blocker, so the force is the shift force less nothing (no motion, no damping).
    let mid = torques.iter().find(|(t, _)| *t >= 0.5 * (t0 + t1)).unwrap().1;
    assert!((mid - t_cone).abs() < 1e-6 * t_cone, "cone torque {mid} vs {t_cone}");
}

#[test]
fn dog_box_upshift_under_ignition_cut_takes_30_to_80_ms() {
    let mut v = car("race_sequential.ron");
    let mut input = DriverInput { shift_up: true, ..Default::default() };
    drive(&mut v, &mut input, 0.1, |t, i| i.shift_up = t < 0.01, |_| {});
    assert_eq!(v.engaged_gear(), 1);
    // Full throttle in first to 6500 rpm (the auto-clutch launches).
    input.throttle = 1.0;
    drive(&mut v, &mut input, 10.0, |_, _| {}, |_| {});
    let mut durations = Vec::new();
    let mut cut_during_shift = true;
    for _ in 0..3 {
        let mut n = 0;
        while v.telemetry().engine_rpm < 6500.0 && n < 20000 {
            drive(&mut v, &mut input, DT, |_, _| {}, |_| {});
            n += 1;
        }
        input.shift_up = true;
        let mut done = None;
        drive(
            &mut v,
            &mut input,
            0.3,
            |_, _| {},
            |v| {
                if done.is_none() {
                    cut_during_shift &= v.telemetry().torque_reduction == 1.0 && v.telemetry().throttle == 0.0;
                }
                for e in v.events() {
                    if let VehicleEventKind::ShiftCompleted { duration, .. } = e.kind {
                        done = Some(duration);
                    }
                }
            },
        );
        input.shift_up = false;
        durations.push(done.expect("upshift did not complete"));
    }
    println!("upshift times {durations:?}");
    assert!(cut_during_shift, "the ignition was not cut for the whole shift");
    for d in durations {
        assert!((0.030..=0.080).contains(&d), "shift took {d} s");
    }
}

/// Drives the 350Z in `gear` with its rear left wheel on ice, lifting off after 2 s, and checks
/// at every step that the slipping pack carries half of `preload + ramp |T_in|`, the ramp being
/// the flank the input torque bears on: power while it drives the carrier forward (`T_in >= 0`),
/// coast otherwise. Returns the steps slipping on each flank.
fn limited_slip_run(gear: i32) -> (usize, usize) {
    let mut v = car("nissan_350z.ron");
    let mut input = DriverInput::default();
    engage(&mut v, &mut input, gear);
    // Rear left on ice: it spins, the clutch pack slips and carries the locking torque.
    v.set_surface_friction(2, 0.05);
    let (pre, power, coast) = match v.spec().driveline.differential {
        driveline::core::vehicle::DifferentialSpec::ClutchPack { preload, power_ramp, coast_ramp } => {
            (preload, power_ramp, coast_ramp)
        }
        _ => panic!("the 350Z has a clutch-pack LSD"),
    };
    let pack = element(&v, "diff_r_lsd");
    let fd = element(&v, "final_drive_r");
    input.throttle = 0.3;
    let t0 = v.simulation().time();
    let (mut power_steps, mut coast_steps) = (0, 0);
    let mut worst: f64 = 0.0;
    drive(
        &mut v,
        &mut input,
        3.0,
        |t, i| {
            i.clutch = (1.0 - (t - t0) / 1.0).clamp(0.0, 1.0);
            // Lift off after 2 s: the other flank takes over.
            if t - t0 > 2.0 {
                i.throttle = 0.0;
            }
        },
        |v| {
            let sim = v.simulation();
            if matches!(sim.element_mode(pack), Some(FrictionMode::Forward | FrictionMode::Backward)) {
                // The torque the final drive delivers to the carrier.
                let t_in = -sim.element_torque(fd);
                let power_side = t_in >= 0.0;
                let ramp = if power_side { power } else { coast };
                let expected = pre + ramp * t_in.abs();
                let locking = 2.0 * sim.element_torque(pack).abs();
                worst = worst.max((locking - expected).abs() / expected);
                if power_side { power_steps += 1 } else { coast_steps += 1 }
            }
        },
    );
    println!(
        "LSD in gear {gear}: {power_steps} power and {coast_steps} coast steps slipping, worst relative error {worst:e}"
    );
    // The pack limit is part of the coupled solve: it matches the input torque of the same
    // instant to rounding.
    assert!(worst < 1e-9, "locking torque off by {worst}");
    let tm = v.telemetry();
    assert!(tm.wheel_speed[2] != tm.wheel_speed[3], "the wheels should differ");
    (power_steps, coast_steps)
}

#[test]
fn limited_slip_locking_torque_follows_preload_plus_ramp() {
    // Forward in first: power while driving, coast after the lift.
    let (power_steps, coast_steps) = limited_slip_run(1);
    assert!(power_steps > 100 && coast_steps > 10, "slipped on power {power_steps}, on coast {coast_steps} steps");
    // Reversing under power pulls the carrier backward: the ramps bear on their coast flanks
    // (and on the power flanks after the lift, when the car rolling backward drives the
    // engine).
    let (power_steps, coast_steps) = limited_slip_run(-1);
    assert!(coast_steps > 100, "reversing slipped on coast {coast_steps} steps (power {power_steps})");
}

#[test]
fn braked_car_on_a_20_percent_grade_does_not_creep_in_60_s() {
    let mut v = car("nissan_350z.ron");
    let mut input = DriverInput { brake: 0.6, grade: 0.2, ..Default::default() };
    drive(&mut v, &mut input, 60.0, |_, _| {}, |_| {});
    let tm = v.telemetry();
    // Brakes and tyres are stuck friction elements: the car does not move at all, not even by
    // rounding.
    assert_eq!(tm.distance, 0.0, "the car crept {} m", tm.distance);
    assert_eq!(tm.speed, 0.0);
    // Brakes and the (static) rolling resistance carry the grade, m g sin(atan 0.2) r over the
    // four wheels, split by minimum norm.
    let b = v.spec().body;
    let need = b.mass * 9.80665 * (0.2f64.atan()).sin() * v.spec().wheels.radius;
    let rolling: f64 =
        WHEELS.iter().map(|w| v.simulation().element_torque(element(&v, &format!("rolling_{w}"))).abs()).sum();
    let held: f64 = tm.brake_torque.iter().map(|t| t.abs()).sum::<f64>() + rolling;
    // Rounding of the minimum-norm split only.
    assert!((held - need).abs() < 1e-9 * need, "brakes and rolling resistance hold {held} N m, grade needs {need} N m");
}

#[test]
fn launch_on_a_low_friction_surface_spins_the_driven_wheels() {
    let mut v = car("nissan_350z.ron");
    let mut input = DriverInput::default();
    engage(&mut v, &mut input, 1);
    for k in 0..4 {
        v.set_surface_friction(k, 0.2);
    }
    input.throttle = 0.6;
    let t0 = v.simulation().time();
    let mut max_slip = [0.0f64; 4];
    let mut max_force_ratio = 0.0f64;
    drive(
        &mut v,
        &mut input,
        3.0,
        |t, i| i.clutch = (1.0 - (t - t0) / 0.5).clamp(0.0, 1.0),
        |v| {
            let tm = v.telemetry();
            for k in 0..4 {
                max_slip[k] = max_slip[k].max(tm.tyre_slip[k].abs());
            }
            // The force never exceeds the peak D F_z mu_surface.
            let d = v.spec().wheels.tyre.d;
            max_force_ratio = max_force_ratio.max(tm.tyre_force[2].abs() / (d * 0.2 * tm.tyre_load[2]));
        },
    );
    println!("max slip velocity per wheel {max_slip:?} m/s, max force / peak {max_force_ratio}");
    assert!(max_slip[2] > 1.0 && max_slip[3] > 1.0, "driven wheels did not spin: {max_slip:?}");
    // (A rolling tyre's slip is the difference of the wheel's rim speed and the body's, one
    // of them dependent on the other: zero to the rounding of speeds of 10 m/s, 2e-15.)
    assert!(max_slip[0] <= 1e-12, "front wheels roll without slip: {max_slip:?}");
    assert!(max_force_ratio <= 1.0 + 1e-9);
}

#[test]
fn external_chassis_coupling_reproduces_the_built_in_body() {
    // The same car and driver, once on its own body and once on a "game" chassis that the test
    // integrates (a point mass with drag). Load transfer is off on both (cg height 0), so the
    // static loads the game writes are the built-in ones.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/nissan_350z.ron");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut spec = Vehicle::parse(&text, "350z").unwrap();
    spec.body.cg_height = 0.0;
    let mut own = Vehicle::new(spec.clone()).unwrap();
    let mut ext = Vehicle::new_external(spec.clone()).unwrap();
    let b = spec.body;
    let drag = 0.5 * b.air_density * b.drag_area;
    let loads = [b.front_weight, b.front_weight, 1.0 - b.front_weight, 1.0 - b.front_weight]
        .map(|s| s * b.mass * 9.80665 / 2.0);
    let (mut v, mut a) = (0.0f64, 0.0f64);
    let mut input = DriverInput { clutch: 1.0, gear: 1, ..Default::default() };
    let mut worst = 0.0f64;
    for k in 0..6000 {
        let t = k as f64 * DT;
        input.clutch = if t < 1.2 { 1.0 } else { (1.0 - (t - 1.2) / 1.0).max(0.0) };
        input.throttle = if t < 1.2 { 0.0 } else { 0.3 };
        own.step(&input, DT).unwrap();
        for w in 0..4 {
            ext.set_wheel_contact(w, v, a, loads[w]);
        }
        ext.step(&input, DT).unwrap();
        // The game's explicit chassis update with the tyre forces read back. Rolling resistance
        // sits in the wheels on both sides.
        let fx: f64 = ext.telemetry().tyre_force.iter().sum();
        a = (fx - drag * v * v.abs()) / b.mass;
        v += DT * a;
        worst = worst.max((own.telemetry().speed - v).abs());
    }
    println!("body {} m/s, external {} m/s, worst difference {worst} m/s", own.telemetry().speed, v);
    assert!(own.telemetry().speed > 5.0);
    // The game integrates its chassis explicitly, one step behind the implicit solve: an O(dt)
    // difference, under 0.01 m/s over 6 s of launch at 1 ms (0.003 measured).
    assert!(worst < 0.01, "external coupling drifts by {worst} m/s");
}

#[test]
fn backlash_dog_model_engages_aligned_and_carries_the_dog_clutch_law() {
    use driveline::core::elements::wrap_pitch;
    use driveline::core::vehicle::DogModel;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/race_sequential.ron");
    let mut spec = Vehicle::parse(&std::fs::read_to_string(&path).unwrap(), "race").unwrap();
    spec.gearbox.as_mut().unwrap().dog.model = DogModel::Backlash;
    let dog = spec.gearbox.as_ref().unwrap().dog;
    let mut v = Vehicle::new(spec).unwrap();
    let dog1 = element(&v, "dog1");
    let pitch = std::f64::consts::TAU / dog.teeth as f64;
    let half = dog.backlash_deg.to_radians() / 2.0;
    let mut input = DriverInput { shift_up: true, ..Default::default() };
    let mut engaged_angle = None;
    drive(
        &mut v,
        &mut input,
        0.5,
        |t, i| i.shift_up = t < 0.01,
        |v| {
            if engaged_angle.is_none() && has(v, |k| *k == VehicleEventKind::DogEngaged { gear: 1 }) {
                engaged_angle = Some(v.simulation().element_relative(dog1).unwrap().0);
            }
        },
    );
    // The Simscape Driveline Dog Clutch: the ring drops in only with a hub gap in front of it, |phi| <= delta / 2 from a
    // gap centre (checked at the start of the step it went in, up to that step's rotation).
    let phi = engaged_angle.expect("first never went in");
    assert!(wrap_pitch(phi, pitch).abs() <= half + 0.05, "engaged at {phi} rad");
    assert_eq!(v.engaged_gear(), 1);
    // Drive off: the dogs carry the torque through their contact spring and damper.
    input.throttle = 0.4;
    let mut checked = 0;
    drive(
        &mut v,
        &mut input,
        2.0,
        |_, _| {},
        |v| {
            let (phi, w) = v.simulation().element_relative(dog1).unwrap();
            let x = wrap_pitch(phi, pitch);
            let over = if x > half {
                x - half
            } else if x < -half {
                x + half
            } else {
                0.0
            };
            let tau = v.simulation().element_torque(dog1);
            if over != 0.0 {
                let law = dog.stiffness * over + dog.damping * w;
                assert!((tau - law).abs() <= 1e-9 * law.abs().max(1.0), "tau {tau} vs law {law}");
                checked += 1;
            } else {
                assert_eq!(tau, 0.0, "no torque inside the free play");
            }
        },
    );
    assert!(checked > 1000, "the dogs were in contact for only {checked} steps");
    assert!(v.telemetry().speed > 3.0);
}

#[test]
fn engine_controller_idles_limits_revs_stalls_and_restarts_with_the_starter() {
    let mut v = car("nissan_350z.ron");
    let e = v.spec().engine.clone();
    // Idle: neutral, clutch engaged, the PI holds the idle speed.
    let mut input = DriverInput::default();
    drive(&mut v, &mut input, 3.0, |_, _| {}, |_| {});
    let idle = v.telemetry().engine_rpm;
    assert!((idle - e.idle_rpm).abs() < 5.0, "idles at {idle} rpm, target {}", e.idle_rpm);
    // Full throttle in neutral: the limiter cuts at its speed and the speed stays below it plus
    // what one step of acceleration adds.
    input.throttle = 1.0;
    let mut cuts = 0;
    let mut peak: f64 = 0.0;
    drive(
        &mut v,
        &mut input,
        3.0,
        |_, _| {},
        |v| {
            cuts += v.events().iter().filter(|e| e.kind == VehicleEventKind::LimiterCut).count();
            peak = peak.max(v.telemetry().engine_rpm);
        },
    );
    assert!(cuts >= 2, "the limiter cut {cuts} times");
    assert!(peak > e.rev_limiter.rpm && peak < e.rev_limiter.rpm + 100.0, "peak {peak} rpm");
    // Ignition off: the engine runs down on its own friction and stops.
    input.throttle = 0.0;
    input.ignition = false;
    drive(&mut v, &mut input, 6.0, |_, _| {}, |_| {});
    assert!(!v.telemetry().running);
    assert!(v.telemetry().engine_rpm < e.stall_rpm, "still at {} rpm", v.telemetry().engine_rpm);
    // Ignition on and the starter: it cranks past the start speed and runs again.
    input.ignition = true;
    input.starter = true;
    let mut started = false;
    drive(&mut v, &mut input, 2.0, |_, _| {}, |v| started |= has(v, |k| *k == VehicleEventKind::Started));
    assert!(started, "no start at {} rpm", v.telemetry().engine_rpm);
    input.starter = false;
    drive(&mut v, &mut input, 3.0, |_, _| {}, |_| {});
    assert!((v.telemetry().engine_rpm - e.idle_rpm).abs() < 20.0, "back at {} rpm", v.telemetry().engine_rpm);
}

#[test]
fn shifting_a_synchromesh_box_without_the_clutch_does_not_go_in() {
    let mut v = car("nissan_350z.ron");
    let mut input = DriverInput::default();
    engage(&mut v, &mut input, 1);
    input.throttle = 0.3;
    let t0 = v.simulation().time();
    drive(&mut v, &mut input, 3.0, |t, i| i.clutch = (1.0 - (t - t0) / 1.0).clamp(0.0, 1.0), |_| {});
    // Lever to second with the clutch up and the throttle held: the cone cannot pull the
    // engine down to the new speed, the blocker holds the sleeve, the gear never goes in.
    input.gear = 2;
    let mut completed = false;
    drive(
        &mut v,
        &mut input,
        2.0,
        |_, _| {},
        |v| completed |= has(v, |k| matches!(k, VehicleEventKind::ShiftCompleted { .. })),
    );
    assert!(!completed, "second went in without the clutch");
    assert_eq!(v.engaged_gear(), 0);
}

#[test]
fn all_wheel_drive_centre_differential_splits_the_torque_by_its_ratio() {
    use driveline::core::vehicle::{DifferentialSpec, Drive};
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/nissan_350z.ron");
    let mut spec = Vehicle::parse(&std::fs::read_to_string(&path).unwrap(), "350z").unwrap();
    spec.driveline.drive = Drive::All { front_share: 0.4, centre: DifferentialSpec::Open };
    spec.driveline.differential = DifferentialSpec::Open;
    let mut v = Vehicle::new(spec).unwrap();
    let mut input = DriverInput::default();
    engage(&mut v, &mut input, 1);
    input.throttle = 0.3;
    let t0 = v.simulation().time();
    drive(&mut v, &mut input, 4.0, |t, i| i.clutch = (1.0 - (t - t0) / 1.0).clamp(0.0, 1.0), |_| {});
    let (f, r) = (element(&v, "final_drive_f"), element(&v, "final_drive_r"));
    let tf = v.simulation().element_torque(f);
    let tr = v.simulation().element_torque(r);
    let share = tf / (tf + tr);
    println!("front share {share}");
    // The planetary splits 1/(1 + r) exactly; the propeller shafts' inertia (accelerating with
    // the car) moves it by well under 1 %.
    assert!((share - 0.4).abs() < 0.01, "front share {share}");
    let tm = v.telemetry();
    assert!(tm.drive_torque.iter().all(|&t| t > 0.0), "all four wheels drive: {:?}", tm.drive_torque);
}

#[test]
fn clutch_heat_balances_the_friction_work() {
    let mut v = car("nissan_350z.ron");
    let mut input = DriverInput::default();
    engage(&mut v, &mut input, 1);
    let th = v.spec().clutch.as_ref().unwrap().thermal.clone();
    // A slow, slipping launch: several kJ into the plate.
    input.throttle = 0.4;
    let t0 = v.simulation().time();
    let mut work = 0.0;
    let mut cooled = 0.0;
    let mut last_p = v.telemetry().clutch_power;
    drive(
        &mut v,
        &mut input,
        5.0,
        |t, i| i.clutch = (0.62 - (t - t0) / 8.0).clamp(0.0, 1.0),
        |v| {
            let tm = v.telemetry();
            work += 0.5 * (tm.clutch_power + last_p) * DT;
            last_p = tm.clutch_power;
            cooled += th.cooling * (tm.clutch_temperature - th.ambient) * DT;
        },
    );
    let stored = th.heat_capacity * (v.telemetry().clutch_temperature - th.ambient);
    println!("friction work {work:.0} J, stored {stored:.0} J, cooled {cooled:.0} J");
    assert!(work > 5e3, "only {work} J of slip");
    // The thermal model integrates the same trapezoid, cooling implicitly: the books balance to
    // the difference between implicit and rectangle cooling sums, far under 1 %.
    assert!((stored + cooled - work).abs() < 0.01 * work, "stored {stored} + cooled {cooled} vs work {work}");
}

#[test]
fn non_finite_driver_inputs_are_replaced_and_reported_never_propagated() {
    let mut v = car("nissan_350z.ron");
    let mut input = DriverInput {
        throttle: f64::NAN,
        brake: f64::INFINITY,
        clutch: f64::NEG_INFINITY,
        grade: f64::NAN,
        ..Default::default()
    };
    v.step(&input, DT).unwrap();
    assert!(has(&v, |k| matches!(k, VehicleEventKind::InputRejected { .. })));
    let t = v.telemetry();
    assert!(t.engine_rpm.is_finite() && t.speed.is_finite() && t.clutch_temperature.is_finite());
    // Out-of-range pedals are clamped, a bad step is refused without touching the state.
    input = DriverInput { throttle: 7.0, clutch: -3.0, ..Default::default() };
    v.step(&input, DT).unwrap();
    assert!(v.telemetry().throttle <= 1.0);
    let before = v.simulation().time();
    assert!(v.step(&input, f64::NAN).is_err());
    assert!(v.step(&input, -1e-3).is_err());
    assert_eq!(v.simulation().time(), before);
    // Contact and surface setters ignore NaN.
    v.set_surface_friction(0, f64::NAN);
    v.set_wheel_contact(0, f64::NAN, f64::INFINITY, f64::NAN);
    v.step(&input, DT).unwrap();
    assert!(v.telemetry().tyre_force.iter().all(|f| f.is_finite()));
}

/// The run-time input policy: out of range (infinities included) clamps, NaN keeps the last
/// valid value, and each episode of a bad input is reported once.
#[test]
fn bad_driver_inputs_clamp_or_hold_and_are_reported_once_per_episode() {
    use driveline::core::vehicle::InputName;
    let mut v = car("sedan_8hp.ron");
    let rejected = |v: &Vehicle| -> Vec<(InputName, f64, f64)> {
        v.events()
            .iter()
            .filter_map(|e| match e.kind {
                VehicleEventKind::InputRejected { input, value, used } => Some((input, value, used)),
                _ => None,
            })
            .collect()
    };
    let good = DriverInput { throttle: 0.3, brake: 0.2, grade: 0.05, ..Default::default() };
    v.step(&good, DT).unwrap();
    assert!(rejected(&v).is_empty());
    // NaN throttle keeps 0.3; infinite brake clamps to 1; a 300 % grade clamps to MAX_GRADE.
    let bad = DriverInput { throttle: f64::NAN, brake: f64::INFINITY, grade: 3.0, ..good };
    v.step(&bad, DT).unwrap();
    let r = rejected(&v);
    assert_eq!(r.len(), 3, "{r:?}");
    assert!(r[0].0 == InputName::Throttle && r[0].1.is_nan() && r[0].2 == 0.3);
    assert_eq!((r[1].0, r[1].1, r[1].2), (InputName::Brake, f64::INFINITY, 1.0));
    assert_eq!((r[2].0, r[2].2), (InputName::Grade, driveline::core::vehicle::MAX_GRADE));
    // The same bad inputs for 100 more steps: no more reports.
    for _ in 0..100 {
        v.step(&bad, DT).unwrap();
        assert!(rejected(&v).is_empty());
    }
    // Valid for a step, then bad again: a new episode, reported again.
    v.step(&good, DT).unwrap();
    v.step(&bad, DT).unwrap();
    assert_eq!(rejected(&v).len(), 3);
    let t = v.telemetry();
    assert!(t.speed.is_finite() && t.engine_rpm.is_finite() && t.brake_torque.iter().all(|b| b.is_finite()));
}

#[test]
fn fuel_use_integrates_the_fuel_map_and_stops_with_the_ignition() {
    use driveline::core::vehicle::FuelMapSpec;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/nissan_350z.ron");
    let mut spec = Vehicle::parse(&std::fs::read_to_string(&path).unwrap(), "350z").unwrap();
    // A synthetic bilinear map, g/s over (rpm, N m).
    let map = FuelMapSpec {
        rpm: vec![1000.0, 7000.0],
        torque: vec![0.0, 400.0],
        grams_per_s: vec![vec![0.3, 4.0], vec![2.0, 25.0]],
        density: 745.0,
    };
    spec.engine.fuel = Some(map.clone());
    let mut v = Vehicle::new(spec).unwrap();
    let mut input = DriverInput { throttle: 0.2, ..Default::default() };
    let mut expected = 0.0;
    drive(
        &mut v,
        &mut input,
        2.0,
        |_, _| {},
        |v| {
            let t = v.telemetry();
            if t.running && t.throttle > 0.0 {
                expected += map.rate(t.engine_rpm, t.engine_torque.max(0.0)) * DT;
            }
        },
    );
    let used = v.telemetry().fuel_used;
    println!("fuel used {used} g, expected {expected} g");
    assert!(used > 0.5, "only {used} g in 2 s at part throttle");
    // Same rule, same end-of-step values: equal to rounding.
    assert!((used - expected).abs() < 1e-9 * expected);
    // Ignition off: no fuel at all.
    input.ignition = false;
    drive(&mut v, &mut input, 1.0, |_, _| {}, |_| {});
    let after = v.telemetry().fuel_used;
    drive(&mut v, &mut input, 1.0, |_, _| {}, |_| {});
    assert_eq!(v.telemetry().fuel_used, after);
}

/// `Layout::mismatch` tells a network that can no longer carry a vehicle's controllers: the
/// layout's own network can; one with a part renamed and one whose clutch force is a constant
/// instead of the run-time input the actuator writes cannot, each with the name said.
#[test]
fn a_network_that_lost_what_the_controllers_drive_is_told_apart() {
    use driveline::core::vehicle::build::{Road, shared};
    use driveline::core::{Network, Signal, Simulation};
    let v = car("nissan_350z.ron");
    let (_, layout) = shared(v.spec(), Road::Body);
    let sim_of = |spec: &driveline::core::NetworkSpec| Simulation::new(Network::build(spec).unwrap());
    assert_eq!(layout.mismatch(&sim_of(&layout.spec)), None);
    let mut renamed = layout.spec.clone();
    let k = renamed.elements.iter().position(|e| e.name == "wheel_rr").unwrap();
    renamed.elements[k].name = "wheel_rear_right".into();
    for c in &mut renamed.connections {
        for end in [&mut c.0, &mut c.1] {
            if let Some(flange) = end.strip_prefix("wheel_rr.") {
                *end = format!("wheel_rear_right.{flange}");
            }
        }
    }
    let why = layout.mismatch(&sim_of(&renamed)).expect("a part renamed");
    assert!(why.contains("'wheel_rr'"), "{why}");
    let mut constant = layout.spec.clone();
    let clutch = constant.elements.iter_mut().find(|e| e.name == "clutch").unwrap();
    let mut changed = false;
    for s in clutch.kind.signals_mut() {
        if matches!(s, Signal::Input { name, .. } if name == "clutch.force") {
            *s = Signal::Constant(1.0);
            changed = true;
        }
    }
    assert!(changed, "the clutch's force is the input `clutch.force`");
    let why = layout.mismatch(&sim_of(&constant)).expect("an input made a constant");
    assert!(why.contains("'clutch.force'"), "{why}");
}

/// `Simulation::element_outputs` (what a fleet's part writes read, in one go) gives every
/// element exactly what the separate accessors give, bit for bit, through an 8HP sedan's launch
/// and upshifts: bodies their angle and speed, the others their relative state, torque, mode,
/// dissipation and engagement.
#[test]
fn element_outputs_read_what_the_separate_accessors_read() {
    use driveline::core::automatic::Selector;
    use driveline::core::{DriverInput, ElementOutputs};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron");
    let mut vehicle = driveline::core::Vehicle::load(&path).unwrap();
    let input = DriverInput { selector: Selector::Drive, throttle: 0.8, ..Default::default() };
    let (mut bodies, mut relatives, mut engagements) = (0, 0, 0);
    for step in 0..8000 {
        vehicle.step(&input, 1e-3).unwrap();
        if step % 97 != 0 {
            continue;
        }
        let sim = vehicle.simulation();
        let bits = |x: f64| x.to_bits();
        for k in 0..sim.network().elements.len() {
            match sim.element_outputs(k).unwrap() {
                ElementOutputs::Body { angle, speed } => {
                    let (a, s) = sim.body_state(k).unwrap();
                    assert_eq!((bits(angle), bits(speed)), (bits(a), bits(s)), "element {k}");
                    bodies += 1;
                }
                ElementOutputs::Coupling { relative, engagement } => {
                    assert!(sim.body_state(k).is_none());
                    match (relative, sim.element_relative(k)) {
                        (Some(r), Some((phi, w))) => {
                            assert_eq!((bits(r.phi_rel), bits(r.w_rel)), (bits(phi), bits(w)), "element {k}");
                            assert_eq!(bits(r.torque), bits(sim.element_torque(k)));
                            assert_eq!(bits(r.dissipation), bits(sim.element_dissipation(k)));
                            assert_eq!(r.mode, sim.element_mode(k));
                            relatives += 1;
                        }
                        (None, None) => {}
                        other => panic!("element {k}: {other:?}"),
                    }
                    assert_eq!(engagement.map(bits), sim.element_engagement(k).map(bits), "element {k}");
                    engagements += usize::from(engagement.is_some());
                }
            }
        }
        assert!(sim.element_outputs(sim.network().elements.len()).is_none());
        // The pass gives every element that reports something its outputs, to the bit: the
        // bodies in index order, then the others in index order (`ElementOutputs`' `==` would
        // take -0.0 for 0.0 and fail on NaN: compared by bits).
        let key = |o: ElementOutputs| match o {
            ElementOutputs::Body { angle, speed } => vec![bits(angle), bits(speed)],
            ElementOutputs::Coupling { relative, engagement } => {
                let mut v: Vec<u64> = relative
                    .map(|r| vec![bits(r.phi_rel), bits(r.w_rel), bits(r.torque), bits(r.dissipation)])
                    .unwrap_or_default();
                v.push(relative.map_or(u64::MAX, |r| r.mode.map_or(9, |m| m as u64)));
                v.push(engagement.map_or(u64::MAX - 1, bits));
                v
            }
        };
        let passed = std::cell::RefCell::new(Vec::new());
        sim.for_each_element_output(
            |k, angle, speed| passed.borrow_mut().push((k, key(ElementOutputs::Body { angle, speed }))),
            |k, relative, engagement| {
                passed.borrow_mut().push((k, key(ElementOutputs::Coupling { relative, engagement })))
            },
        );
        let outputs = |k: usize| sim.element_outputs(k).unwrap();
        let reports = |o: &ElementOutputs| match o {
            ElementOutputs::Body { .. } => true,
            ElementOutputs::Coupling { relative, engagement } => relative.is_some() || engagement.is_some(),
        };
        let is_body = |k: &usize| matches!(outputs(*k), ElementOutputs::Body { .. });
        let (bodies_first, others): (Vec<usize>, Vec<usize>) =
            (0..sim.network().elements.len()).filter(|&k| reports(&outputs(k))).partition(is_body);
        let one_by_one: Vec<_> = bodies_first.into_iter().chain(others).map(|k| (k, key(outputs(k)))).collect();
        assert_eq!(passed.into_inner(), one_by_one);
    }
    assert!(bodies > 0 && relatives > 0 && engagements > 0, "{bodies} {relatives} {engagements}");
    assert!(vehicle.telemetry().engaged_gear >= 2, "it shifted: gear {}", vehicle.telemetry().engaged_gear);
}
