//! Many independent vehicles stepped together on threads, without an ECS.
//!
//! A [`Fleet`] holds plain [`Vehicle`]s, each with its own [`Driver`], and steps them all at one
//! fixed step: the cars are split into one contiguous run per thread (the calling thread steps
//! the first), and every thread steps its run once per step, a [`Crew`] handing the steps out.
//! Within a run the next cars can be hinted toward the cache while one steps
//! ([`crate::prefetch::for_each_ahead`]), as a [`HintTuner`] decides at each step.
//!
//! It is the Bevy plugin's fleet without the plugin: `driveline bench --against-core` times it
//! beside the plugin's fleet of the same cars, so that what the ECS adds per vehicle-step can be
//! read off on the machine at hand; it is also a way to run a Monte Carlo or a traffic of cars
//! headless with no App at all.
//!
//! ```
//! use driveline_core::fleet::{Fleet, FleetDrive};
//! use driveline_core::{DriverInput, Vehicle};
//! # let spec = Vehicle::parse(include_str!("../../../assets/vehicles/nissan_350z.ron"), "350z")
//! #     .unwrap();
//! let cars = (0..4).map(|_| Vehicle::new(spec.clone())).collect::<Result<Vec<_>, _>>().unwrap();
//! let cruise = DriverInput { throttle: 0.2, ..Default::default() };
//! let mut fleet = Fleet::new(cars, FleetDrive::Fixed(cruise), 1e-3).unwrap();
//! assert_eq!(fleet.run(100, 2), 0, "no step refused");
//! assert!(fleet.vehicles().all(|v| (v.telemetry().time - 0.1).abs() < 1e-9));
//! ```

use crate::crew::Crew;
use crate::prefetch::{HintPolicy, HintTuner};
use crate::vehicle::driver::{Cycle, Driver, DriverParams};
use crate::{DriverInput, Vehicle};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// How a [`Fleet`]'s cars are driven at each step.
#[derive(Debug, Clone)]
pub enum FleetDrive {
    /// Each car's driver model follows `cycle`, car `i` reading the trace `spacing * i` seconds
    /// ahead of its own clock (wrapped to the trace's length), so that the cars are spread
    /// over it as traffic is.
    Cycle {
        /// The speed trace the drivers follow.
        cycle: Arc<Cycle>,
        /// Seconds of trace between one car and the next (`driveline bench`: 37 s).
        spacing: f64,
    },
    /// Every car gets this input at every step.
    Fixed(DriverInput),
}

/// Why a [`Fleet`] was not made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FleetError {
    /// The fixed step is not finite and positive.
    #[error("the fleet's step {0} s must be finite and positive")]
    Step(f64),
    /// The cycle's spacing is not finite.
    #[error("the spacing of the cars on the cycle, {0} s, must be finite")]
    Spacing(f64),
}

/// One car of a fleet: its vehicle, its driver and where on the cycle it drives.
struct Car {
    vehicle: Vehicle,
    driver: Driver,
    /// Seconds of trace ahead of the vehicle's clock ([`FleetDrive::Cycle`]).
    offset: f64,
}

/// Independent vehicles stepped together at one fixed step on threads (see the module docs).
pub struct Fleet {
    cars: Vec<Car>,
    drive: FleetDrive,
    dt: f64,
    tuner: HintTuner,
    /// The threads beside the calling one, made at the first run of a thread count.
    crew: Option<Crew>,
    /// How long the crew's workers watch for the next step before they sleep.
    spin: std::time::Duration,
}

impl Fleet {
    /// A fleet of `vehicles` driven as `drive` says at steps of `dt` seconds, hinting the next
    /// cars toward the cache as [`HintPolicy::Auto`] decides (see [`Fleet::set_hints`]).
    pub fn new(vehicles: Vec<Vehicle>, drive: FleetDrive, dt: f64) -> Result<Self, FleetError> {
        if !(dt.is_finite() && dt > 0.0) {
            return Err(FleetError::Step(dt));
        }
        let (duration, spacing) = match &drive {
            FleetDrive::Cycle { spacing, .. } if !spacing.is_finite() => return Err(FleetError::Spacing(*spacing)),
            FleetDrive::Cycle { cycle, spacing } => (cycle.duration(), *spacing),
            FleetDrive::Fixed(_) => (0.0, 0.0),
        };
        let cars = vehicles
            .into_iter()
            .enumerate()
            .map(|(i, vehicle)| {
                let driver = Driver::new(vehicle.spec(), DriverParams::default());
                let offset = if duration > 0.0 { (i as f64 * spacing).rem_euclid(duration) } else { 0.0 };
                Car { vehicle, driver, offset }
            })
            .collect();
        Ok(Self { cars, drive, dt, tuner: HintTuner::new(HintPolicy::Auto), crew: None, spin: Default::default() })
    }

    /// How many cars the fleet has.
    pub fn len(&self) -> usize {
        self.cars.len()
    }

    /// Whether the fleet has no car.
    pub fn is_empty(&self) -> bool {
        self.cars.is_empty()
    }

    /// The fleet's fixed step, s.
    pub fn dt(&self) -> f64 {
        self.dt
    }

    /// The cars' vehicles, in the order they were given.
    pub fn vehicles(&self) -> impl Iterator<Item = &Vehicle> {
        self.cars.iter().map(|c| &c.vehicle)
    }

    /// Whether each step hints the next cars toward the cache: always, never, or as a trial of
    /// both now and then decides ([`HintPolicy::Auto`], the default).
    pub fn set_hints(&mut self, policy: HintPolicy) {
        self.tuner.set_policy(policy);
    }

    /// Whether the steps hint now (the last choice of [`HintPolicy::Auto`]).
    pub fn hinting(&self) -> bool {
        self.tuner.chosen()
    }

    /// How long the worker threads watch for the next step after theirs before they sleep
    /// (zero, the default: at once; [`Crew::set_spin`] says when watching pays).
    pub fn set_spin(&mut self, spin: std::time::Duration) {
        self.spin = spin;
    }

    /// Steps every car `steps` times, the cars split over `threads` threads (at least one: the
    /// calling thread steps the first run of cars, the fleet's `threads - 1` worker threads the
    /// others; see [`crate::crew`]).
    /// A car whose step is refused ([`Vehicle::step`]'s error) stays where it was and goes on
    /// at the next step; the number of refused car-steps is returned.
    pub fn run(&mut self, steps: u64, threads: usize) -> usize {
        let n = self.cars.len();
        if n == 0 || steps == 0 {
            return 0;
        }
        let threads = threads.clamp(1, n);
        let (dt, drive) = (self.dt, &self.drive);
        let refused = AtomicUsize::new(0);
        let step = |c: &mut Car| {
            let input = drive_input(drive, c, dt);
            if c.vehicle.step(&input, dt).is_err() {
                refused.fetch_add(1, Relaxed);
            }
        };
        let run = |cars: &mut [Car], hint: bool| {
            if hint {
                // (The driver model's state with the vehicle's own bytes, as the plugin hints a
                // root's `CycleDriver`.)
                let ahead = |c: &&mut Car, stage: usize| {
                    if stage == 0 {
                        crate::prefetch::value(&c.driver);
                    }
                    c.vehicle.prefetch_stage(stage);
                };
                crate::prefetch::for_each_ahead(cars.iter_mut(), ahead, step);
            } else {
                cars.iter_mut().for_each(step);
            }
        };
        // (As many runs as the cars fill: four cars on three threads are two runs of two.)
        let per_run = n.div_ceil(threads);
        let crew = Crew::fitted(&mut self.crew, n.div_ceil(per_run) - 1);
        crew.set_spin(self.spin);
        // Each run's cars, taken by its run alone (an uncontended lock a run and step).
        let chunks: Vec<Mutex<&mut [Car]>> = self.cars.chunks_mut(per_run).map(Mutex::new).collect();
        let hints = AtomicBool::new(false);
        let pass = |j: usize| {
            let mut cars = chunks[j].lock().unwrap_or_else(|e| e.into_inner());
            run(&mut cars, hints.load(Relaxed));
        };
        for _ in 0..steps {
            hints.store(self.tuner.hints(), Relaxed);
            let started = std::time::Instant::now();
            crew.run_each(chunks.len(), &pass);
            self.tuner.record(started.elapsed().as_secs_f64() / n as f64);
        }
        refused.into_inner()
    }
}

/// Car `c`'s input for the step that starts now, as `drive` says.
fn drive_input(drive: &FleetDrive, c: &mut Car, dt: f64) -> DriverInput {
    match drive {
        FleetDrive::Fixed(input) => *input,
        FleetDrive::Cycle { cycle, .. } => {
            let t = c.vehicle.telemetry();
            c.driver.input_at(cycle, cycle.lap(t.time + c.offset), t, dt)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn car() -> crate::VehicleSpec {
        let text = include_str!("../../../assets/vehicles/nissan_350z.ron");
        Vehicle::parse(text, "nissan_350z.ron").expect("the shipped 350Z parses")
    }

    /// The fleet steps each car as the car would step alone, whatever the thread count: same
    /// inputs, same binary, the same bits (the threads share nothing but the description).
    #[test]
    fn a_fleet_steps_each_car_as_it_steps_alone() {
        let spec = car();
        let cycle = Arc::new(Cycle::new("ramp", vec![0.0, 5.0, 10.0], vec![0.0, 8.0, 0.0]).unwrap());
        let drive = FleetDrive::Cycle { cycle: cycle.clone(), spacing: 3.0 };
        // (Five cars on three threads are runs of two, two and one; four would be two of two.)
        for (cars, threads) in [(5, 1), (5, 2), (5, 3), (4, 3)] {
            let cars = (0..cars).map(|_| Vehicle::new(spec.clone()).unwrap()).collect();
            let mut fleet = Fleet::new(cars, drive.clone(), 1e-3).unwrap();
            // (The second run on the crew the first made, its workers watching between steps.)
            assert_eq!(fleet.run(150, threads), 0);
            fleet.set_spin(std::time::Duration::from_micros(100));
            assert_eq!(fleet.run(150, threads), 0);
            for (i, v) in fleet.vehicles().enumerate() {
                let mut alone = Vehicle::new(spec.clone()).unwrap();
                let mut driver = Driver::new(&spec, DriverParams::default());
                let offset = (i as f64 * 3.0).rem_euclid(cycle.duration());
                for _ in 0..300 {
                    let t = *alone.telemetry();
                    let input = driver.input_at(&cycle, (t.time + offset) % cycle.duration(), &t, 1e-3);
                    alone.step(&input, 1e-3).unwrap();
                }
                let (a, b) = (v.telemetry(), alone.telemetry());
                assert_eq!(a.time.to_bits(), b.time.to_bits(), "car {i}, {threads} thread(s)");
                assert_eq!(a.engine_rpm.to_bits(), b.engine_rpm.to_bits(), "car {i}, {threads} thread(s)");
                assert_eq!(a.speed.to_bits(), b.speed.to_bits(), "car {i}, {threads} thread(s)");
            }
        }
    }

    #[test]
    fn a_bad_step_or_spacing_is_refused() {
        let cruise = FleetDrive::Fixed(DriverInput::default());
        assert_eq!(Fleet::new(Vec::new(), cruise.clone(), 0.0).err(), Some(FleetError::Step(0.0)));
        assert!(matches!(Fleet::new(Vec::new(), cruise, f64::NAN), Err(FleetError::Step(_))));
        let cycle = Arc::new(Cycle::new("flat", vec![0.0, 1.0], vec![0.0, 0.0]).unwrap());
        let drive = FleetDrive::Cycle { cycle, spacing: f64::INFINITY };
        assert_eq!(Fleet::new(Vec::new(), drive, 1e-3).err(), Some(FleetError::Spacing(f64::INFINITY)));
        let mut empty = Fleet::new(Vec::new(), FleetDrive::Fixed(DriverInput::default()), 1e-3).unwrap();
        assert_eq!(empty.run(10, 2), 0);
    }
}
