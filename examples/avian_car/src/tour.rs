//! `--autopilot`: a scripted tour of the terrain that prints what it measured. Full throttle
//! from rest across the icy patch (the driven wheels spin) and over the kicker (a car flies
//! and lands; the truck stays on the ground), up the 20 % slope where it stops and parks (the
//! parking brake and Park hold it: the creep over six seconds is printed), then on up to the
//! plateau (a hill start) and round in a circle (the truck slower). The automatic is driven by
//! selector and pedals; the manual and sequential vehicles by the core's driver model (clutch
//! and gears), following a speed per leg. Without a window:
//! `avian_car --car auto --hz 60 --autopilot --simulate 45`.

use crate::{Chassis, Steering};
use avian3d::prelude::*;
use bevy::prelude::*;
use bevy_driveline::DrivelineSystems;
use bevy_driveline::vehicle::{VehicleInput, VehicleTelemetry};
use driveline_car::{Args, Car};
use driveline_core::automatic::Selector;
use driveline_core::vehicle::DriverInput;
use driveline_core::vehicle::driver::{Cycle, Driver, DriverParams};

/// Runs the tour when `--autopilot` is given (after the example car's own input merge, before
/// the controllers).
pub struct TourPlugin;

impl Plugin for TourPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<Tour>().add_systems(
            FixedUpdate,
            tour.after(DrivelineSystems::Input)
                .before(DrivelineSystems::Control)
                .run_if(|args: Res<Args>| args.autopilot),
        );
    }
}

/// Where the tour is.
#[derive(Default, Clone, Copy, PartialEq, Debug)]
enum Leg {
    /// Held on the brake for a second.
    #[default]
    Start,
    /// Full throttle over the ice and the kicker.
    Launch,
    /// Braking to 8 m/s, then part throttle onto the slope.
    Cruise,
    /// Braking on the slope.
    Stop,
    /// Parked: Park and the parking brake.
    Parked,
    /// Up to the plateau.
    Climb,
    /// Round in a circle.
    Circle,
}

/// The tour's state and what it measured.
#[derive(Resource, Default)]
struct Tour {
    leg: Leg,
    since: f64,
    /// The driven wheels' largest slip ratio on the ice.
    ice_slip: f64,
    /// Time with no wheel on the ground, s; the largest hub torque within a second of landing,
    /// and as a share of what the tyre's grip and the wheel's inertia take.
    airborne: f64,
    landed_at: Option<f64>,
    landing_torque: f64,
    landing_share: f64,
    cruise_torque: f64,
    /// The wheel speeds of the step before the last, and the loads the last step ran on.
    spin: [f64; 4],
    loads: [f64; 4],
    slowed: bool,
    /// Where the car was once settled after parking.
    parked_at: Option<bevy::math::DVec3>,
    /// The lateral acceleration in the circle, g.
    circle_g: f64,
    /// A manual or sequential car's driver (clutch and gears), following a speed per leg.
    driver: Option<Driver>,
}

/// A manual or sequential car's input from its driver following `speed`, m/s.
fn follow(
    driver: &mut Option<Driver>,
    car: &Car,
    tel: &driveline_core::vehicle::Telemetry,
    speed: f64,
    dt: f64,
) -> DriverInput {
    let params = DriverParams { upshift_rpm: 5500.0, a_throttle: 2.0, ..DriverParams::default() };
    let driver = driver.get_or_insert_with(|| Driver::new(&car.spec, params));
    let cycle = Cycle { name: String::new(), time: vec![0.0, 1e9], speed: vec![speed, speed] };
    driver.input(&cycle, tel, dt)
}

#[allow(clippy::too_many_arguments)]
fn tour(
    time: Res<Time>,
    car: Option<Res<Car>>,
    mut state: ResMut<Tour>,
    mut steering: ResMut<Steering>,
    mut cars: Query<(&mut VehicleInput, &VehicleTelemetry)>,
    chassis: Query<(&Chassis, &Position, &LinearVelocity, &AngularVelocity)>,
) {
    let Some(car) = car else { return };
    let Ok((mut input, tel)) = cars.get_mut(car.root) else { return };
    let Ok((ch, place, v, w)) = chassis.single() else { return };
    let t = time.elapsed_secs_f64();
    let tel = &tel.0;
    let here = place.0.as_vec3();
    let z = here.z;
    // The automatic by selector and pedals; a manual or sequential car by its driver, following
    // the speed each leg asks for.
    let manual = car.spec.automatic.is_none();
    let dt = time.delta_secs_f64();
    let drive = |s: &mut Tour, throttle: f64, brake: f64, speed: f64| {
        if manual {
            follow(&mut s.driver, &car, tel, speed, dt)
        } else {
            DriverInput { selector: Selector::Drive, throttle, brake, ignition: true, ..DriverInput::default() }
        }
    };
    let s = &mut *state;
    let next = |s: &mut Tour, leg: Leg| {
        info!("tour: {:?} -> {leg:?} at {t:.2} s, z {z:.1} m, {:.1} m/s", s.leg, tel.speed);
        s.leg = leg;
        s.since = t;
    };
    let hub = tel.drive_torque.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let spin = tel.wheel_speed;
    match s.leg {
        Leg::Start => {
            input.0 = DriverInput { brake: 1.0, clutch: 1.0, ..drive(s, 0.0, 1.0, 0.0) };
            if t > 1.0 {
                next(s, Leg::Launch);
            }
        }
        Leg::Launch => {
            input.0 = drive(s, 1.0, 0.0, 40.0);
            if (-29.0..-15.0).contains(&z) {
                s.ice_slip =
                    s.ice_slip.max(tel.tyre_slip[2].abs().max(tel.tyre_slip[3].abs()) / tel.speed.abs().max(1.0));
            }
            if z > -48.0 {
                s.cruise_torque = s.cruise_torque.max(hub);
            }
            if ch.hits.iter().all(Option::is_none) {
                s.airborne += time.delta_secs_f64();
            } else if s.airborne > 0.0 && s.landed_at.is_none() {
                s.landed_at = Some(t);
            }
            if s.landed_at.is_some_and(|l| t - l < 1.0) {
                s.landing_torque = s.landing_torque.max(hub);
                for k in 0..4 {
                    // The telemetry is the last step's, which ran on the loads written then.
                    let load = s.loads[k];
                    let inertia =
                        car.spec.wheels.inertia * (tel.wheel_speed[k] - s.spin[k]).abs() / time.delta_secs_f64();
                    let grip = car.spec.wheels.radius * car.spec.wheels.tyre.d * load;
                    s.landing_share = s.landing_share.max(tel.drive_torque[k].abs() / (grip + inertia).max(1.0));
                }
            }
            // A heavy vehicle may leave the kicker (its top edge at z = -58 m) without leaving
            // the ground.
            let no_flight = s.airborne == 0.0 && z < -70.0;
            if no_flight {
                info!("tour: ice: largest driven-wheel slip {:.2}; kicker: did not leave the ground", s.ice_slip);
                next(s, Leg::Cruise);
            } else if s.landed_at.is_some_and(|l| t - l > 1.0) {
                info!(
                    "tour: ice: largest driven-wheel slip {:.2}; kicker: {:.2} s in the air, hub torque within 1 s of landing {:.0} N m, at most {:.2} of what the tyre's grip and the wheel's inertia pass (on the ground before: {:.0} N m)",
                    s.ice_slip, s.airborne, s.landing_torque, s.landing_share, s.cruise_torque
                );
                next(s, Leg::Cruise);
            }
        }
        Leg::Cruise => {
            s.slowed |= tel.speed < 8.0;
            input.0 = if s.slowed { drive(s, 0.3, 0.0, 8.0) } else { drive(s, 0.0, 0.6, 8.0) };
            if z < -132.0 {
                next(s, Leg::Stop);
            }
        }
        Leg::Stop => {
            input.0 = DriverInput {
                throttle: 0.0,
                brake: 1.0,
                clutch: if manual { 1.0 } else { 0.0 },
                ..drive(s, 0.0, 1.0, 0.0)
            };
            if v.0.length() < 0.05 && t - s.since > 0.5 {
                next(s, Leg::Parked);
            }
        }
        Leg::Parked => {
            input.0 =
                DriverInput { selector: Selector::Park, parking_brake: 1.0, ignition: true, ..DriverInput::default() };
            // The body settles on its springs after the hard stop (its pitch and bounce ring
            // down over two to three seconds); then six seconds held: a creep would show there.
            if t - s.since > 4.0 && s.parked_at.is_none() {
                s.parked_at = Some(place.0);
            }
            if t - s.since > 10.0 {
                let moved = s.parked_at.map_or(0.0, |at| (place.0 - at).length());
                info!("tour: parked on the 20 % slope: moved {moved:.2e} m in the 6 s after settling for 4 s");
                next(s, Leg::Climb);
            }
        }
        Leg::Climb => {
            input.0 = drive(s, 0.5, 0.0, 12.0);
            if z < -175.0 {
                next(s, Leg::Circle);
            }
        }
        Leg::Circle => {
            // A heavy truck on the car's suspension geometry would roll over at a car's 0.9 g:
            // it circles at 4.5 m/s.
            let speed = if car.spec.body.mass > 5000.0 { 4.5 } else { 8.0 };
            input.0 = drive(s, if tel.speed < speed + 1.0 { 0.4 } else { 0.1 }, 0.0, speed);
            steering.0 = 0.35;
            if t - s.since > 4.0 {
                s.circle_g = s.circle_g.max(v.0.cross(w.0).length() / crate::G);
            }
            if t - s.since > 10.0 && t - s.since - time.delta_secs_f64() <= 10.0 {
                info!("tour: circling at {:.1} m/s, {:.2} g lateral", tel.speed, s.circle_g);
            }
        }
    }
    s.spin = spin;
    s.loads = ch.hits.map(|h| h.map_or(0.0, |h| h.load));
}
