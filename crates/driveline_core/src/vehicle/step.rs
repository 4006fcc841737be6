//! A vehicle's step, phase by phase: input, control (the transmission controller, then the
//! engine controller), actuation, the coupled solve with the caller's overrides, then heat,
//! fuel and telemetry. [`VehicleControl::step`] runs them back to back; the Bevy plugin runs
//! the input and control phases as systems in its `Control` set and the actuation phase in
//! `Actuation`, through the same functions, so that both give the same bits.

use super::*;

/// How a step of the caller's length is taken: in one solve, or, while a box shifts at a step
/// longer than [`SHIFT_SUBSTEP`] or when the vehicle has a rate of its own
/// ([`VehicleControl::set_max_step`]), in equal sub-steps (see [`VehicleControl::step`]). Made by
/// [`VehicleControl::plan_step`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepPlan {
    t0: f64,
    dt: f64,
    n: usize,
}

impl StepPlan {
    /// Number of sub-steps (1 outside shifts, unless the vehicle runs at a rate of its own:
    /// [`VehicleControl::set_max_step`]).
    pub fn substeps(&self) -> usize {
        self.n
    }

    /// Length of sub-step `k` (1-based) when the simulation's clock reads `now`: the sub-steps
    /// end at `t0 + dt k / n`, the last one exactly at `t0 + dt`.
    pub fn length(&self, k: usize, now: f64) -> f64 {
        if self.n == 1 {
            return self.dt;
        }
        let end = if k == self.n { self.t0 + self.dt } else { self.t0 + self.dt * (k as f64 / self.n as f64) };
        end - now
    }
}

/// What the input and control phases of a (sub-)step hand to its actuation phase
/// ([`VehicleControl::actuate`]): the checked driver input, the state they read at the step's
/// start, and the controllers' commands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Controlled {
    /// The driver's input as checked (clamped, NaN replaced by the last valid value).
    input: DriverInput,
    /// Start time and length of the (sub-)step, s.
    t: f64,
    h: f64,
    /// Engine speed at the start, rad/s.
    w_engine: f64,
    /// Vehicle speed at the start, m/s.
    v0: f64,
    /// The throttle the transmission controller passes to the engine controller, [0, 1].
    throttle: f64,
    /// The transmission controller's torque reduction, [0, 1].
    reduction: f64,
    /// The engine controller's output.
    engine: EcuOutput,
}

impl Controlled {
    /// The driver's input as the controllers use it (checked).
    pub fn input(&self) -> &DriverInput {
        &self.input
    }
    /// The effective throttle the torque map gets this step, [0, 1].
    pub fn engine_throttle(&self) -> f64 {
        self.engine.throttle
    }
    /// The transmission controller's torque reduction this step, [0, 1].
    pub fn torque_reduction(&self) -> f64 {
        self.reduction
    }
}

impl VehicleControl {
    /// One step of `dt` seconds of the vehicle in `sim`: input, control and actuation, the
    /// coupled solve, heat, fuel and telemetry. [`Vehicle::step`] and the Bevy plugin both take
    /// their steps through these functions.
    ///
    /// While a box shifts (a manual or sequential box: a gear is asked for, a shift is in
    /// progress, or a sleeve still moves; an automatic: its controller's shift is in progress),
    /// a step longer than [`SHIFT_SUBSTEP`] is taken as equal sub-steps of at most that length,
    /// each with the whole chain of control, actuation and the coupled solve. The shift linkage,
    /// which sees the driveline at a sub-step's start, and the driveline, which feels the
    /// synchroniser cone and the dogs the linkage sets, then exchange their state every
    /// millisecond as in a 1 kHz run, whatever the caller's step; so do the transmission
    /// controller's phases and the clutch pistons of an automatic. Outside shifts a step is one
    /// solve, unless the vehicle runs at a rate of its own ([`VehicleControl::set_max_step`]):
    /// then every step longer than that is taken as equal sub-steps. The driver's input holds
    /// over the whole step.
    ///
    /// A refused solve leaves the simulation where it was; the controllers still see its end,
    /// and the error is returned.
    pub fn step(
        &mut self,
        sim: &mut Simulation,
        tel: &mut Telemetry,
        input: &DriverInput,
        dt: f64,
    ) -> Result<(), StepError> {
        self.step_with(sim, tel, input, dt, &[])
    }

    /// [`VehicleControl::step`] with actuator overrides: after the built-in actuators have
    /// written their inputs, every `(input, value)` of `overrides` is written over them, in
    /// every sub-step of the step (a launch control that modulates the clutch, a user's shift
    /// strategy that drives an automatic's shift elements). Values are clamped to [0, 1]; a
    /// NaN is skipped. Get the handles with [`Simulation::engagement_input`]. With no
    /// overrides this is [`VehicleControl::step`], bit for bit.
    pub fn step_with(
        &mut self,
        sim: &mut Simulation,
        tel: &mut Telemetry,
        input: &DriverInput,
        dt: f64,
        overrides: &[(InputId, f64)],
    ) -> Result<(), StepError> {
        let plan = self.plan_step(sim, input, dt)?;
        self.finish_step(sim, tel, input, &plan, 1, overrides, &[])
    }

    /// Sub-steps `from..=n` of `plan`, each the whole chain ([`VehicleControl::check_input`]
    /// to [`VehicleControl::solve`]) with the same overrides. The Bevy plugin runs the first
    /// sub-step's phases as systems and the rest here.
    pub fn finish_step(
        &mut self,
        sim: &mut Simulation,
        tel: &mut Telemetry,
        input: &DriverInput,
        plan: &StepPlan,
        from: usize,
        engagements: &[(InputId, f64)],
        inputs: &[(InputId, f64)],
    ) -> Result<(), StepError> {
        for k in from..=plan.n {
            let h = plan.length(k, sim.time());
            let pending = self.control_and_actuate(sim, input, h)?;
            self.solve(sim, tel, pending, h, engagements, inputs)?;
        }
        Ok(())
    }

    /// Starts a step of `dt` seconds: clears the last step's events and decides how many
    /// sub-steps it takes (see [`VehicleControl::step`]). Then, for each sub-step `k` of
    /// length [`StepPlan::length`]: [`VehicleControl::check_input`],
    /// [`VehicleControl::control_transmission`], [`VehicleControl::control_engine`],
    /// [`VehicleControl::actuate`] and [`VehicleControl::solve`]. A step of a length that is
    /// not finite and positive is refused.
    pub fn plan_step(&mut self, sim: &Simulation, input: &DriverInput, dt: f64) -> Result<StepPlan, StepError> {
        self.events.clear();
        if !(dt.is_finite() && dt > 0.0) {
            return Err(StepError::BadStep(dt));
        }
        Ok(StepPlan { t0: sim.time(), dt, n: self.substeps(input, dt) })
    }

    /// How many sub-steps a step of `dt` takes (see [`VehicleControl::step`]).
    fn substeps(&self, input: &DriverInput, dt: f64) -> usize {
        // At most `h` long: `dt / h` rounded up, a quotient within rounding of a whole number
        // taken as it.
        let count = |h: f64| ((dt / h) * (1.0 - 1e-12)).ceil().clamp(1.0, 1e6) as usize;
        let own = if dt > self.max_step && dt.is_finite() { count(self.max_step) } else { 1 };
        if !(dt > SHIFT_SUBSTEP && dt.is_finite() && self.controllers.transmission) {
            return own;
        }
        let shifting = match &self.trans {
            Trans::Manual(m) => m.shifting(self.spec.gearbox.as_ref(), input),
            Trans::Automatic(a) => a.tcu.target().is_some(),
        };
        if shifting { own.max(count(SHIFT_SUBSTEP)) } else { own }
    }

    /// Input, control and actuation for a step of `dt` seconds: writes the simulation's inputs.
    /// Follow it with [`Simulation::step`] and [`VehicleControl::after_step`]. (This is one
    /// solve of [`VehicleControl::step`], which also sub-steps shifts.)
    pub fn before_step(
        &mut self,
        sim: &mut Simulation,
        input: &DriverInput,
        dt: f64,
    ) -> Result<PendingStep, StepError> {
        self.events.clear();
        self.control_and_actuate(sim, input, dt)
    }

    /// Phases 1 to 3 of a (sub-)step of `h` seconds, back to back.
    fn control_and_actuate(
        &mut self,
        sim: &mut Simulation,
        input: &DriverInput,
        h: f64,
    ) -> Result<PendingStep, StepError> {
        let mut c = self.check_input(sim, input, h)?;
        self.control_transmission(sim, &mut c);
        self.control_engine(sim, &mut c);
        Ok(self.actuate(sim, &c))
    }

    /// 1. Input: checks the driver's `input` for a (sub-)step of `h` seconds (see the module
    ///    docs) and reads the state the controllers see.
    pub fn check_input(&mut self, sim: &Simulation, input: &DriverInput, h: f64) -> Result<Controlled, StepError> {
        if !(h.is_finite() && h > 0.0) {
            return Err(StepError::BadStep(h));
        }
        let t = sim.time();
        self.now = t;
        let mut inp = *input;
        let fields = [&mut inp.throttle, &mut inp.brake, &mut inp.clutch, &mut inp.parking_brake, &mut inp.grade];
        for (k, v) in fields.into_iter().enumerate() {
            let (lo, hi) = if k == 4 { (-MAX_GRADE, MAX_GRADE) } else { (0.0, 1.0) };
            let given = *v;
            let used = if given.is_nan() { self.last_valid[k] } else { given.clamp(lo, hi) };
            let bad = used != given;
            if bad && !self.rejecting[k] {
                const NAMES: [InputName; 5] = [
                    InputName::Throttle,
                    InputName::Brake,
                    InputName::Clutch,
                    InputName::ParkingBrake,
                    InputName::Grade,
                ];
                push_event(
                    &mut self.events,
                    t,
                    VehicleEventKind::InputRejected { input: NAMES[k], value: given, used },
                );
            }
            self.rejecting[k] = bad;
            self.last_valid[k] = used;
            *v = used;
        }
        let w_engine = sim.body_state(self.ids.engine).map_or(0.0, |s| s.1);
        let v0 = self.vehicle_speed(sim);
        let engine = EcuOutput { throttle: 0.0, starter: 0.0 };
        Ok(Controlled { input: inp, t, h, w_engine, v0, throttle: inp.throttle, reduction: 0.0, engine })
    }

    /// 2a. Control: the shift controller (manual or sequential: gear requests, interlock,
    ///     auto-clutch, auto-blip, ignition cut) or the automatic's TCU, when it runs
    ///     ([`Controllers::transmission`]): the throttle and torque reduction it asks of the
    ///     engine controller.
    pub fn control_transmission(&mut self, sim: &Simulation, c: &mut Controlled) {
        let Controlled { t, h, w_engine, v0, .. } = *c;
        let inp = &c.input;
        let events = &mut self.events;
        let mut push = |k| push_event(events, t, k);
        let (throttle, reduction) = match &mut self.trans {
            _ if !self.controllers.transmission => (inp.throttle, 0.0),
            Trans::Manual(m) => {
                let gb = self.spec.gearbox.as_ref().expect("manual");
                let s = m.select(gb, &self.layout, sim, self.ids.output, inp, t, w_engine, &mut push);
                (s.throttle, s.reduction)
            }
            Trans::Automatic(a) => {
                let at = self.spec.automatic.as_ref().expect("automatic");
                let view = a.view(sim, &self.ids, inp, t, h, w_engine, v0, self.accel);
                let r = a.control(at, &view, &mut push);
                (inp.throttle, r)
            }
        };
        c.throttle = throttle;
        c.reduction = reduction;
    }

    /// 2b. Control: the engine controller (idle speed, rev limiter, stall and start, the
    ///     torque reduction; [`ecu`]), when it runs ([`Controllers::engine`]); else the
    ///     engine's inputs as last written.
    pub fn control_engine(&mut self, sim: &Simulation, c: &mut Controlled) {
        let Controlled { t, h, w_engine, throttle, reduction, .. } = *c;
        let mut ev = [None; 3];
        let mut ne = 0;
        c.engine = if self.controllers.engine {
            let (ignition, starter) = (c.input.ignition, c.input.starter);
            self.ecu.step(&self.spec.engine, t, h, w_engine, throttle, reduction, ignition, starter, |e| {
                if ne < 3 {
                    ev[ne] = Some(e);
                    ne += 1;
                }
            })
        } else {
            EcuOutput { throttle: sim.input_value(self.ids.throttle), starter: sim.input_value(self.ids.starter) }
        };
        for e in ev.into_iter().flatten() {
            self.push(match e {
                EcuEvent::Stalled => VehicleEventKind::Stalled,
                EcuEvent::Started => VehicleEventKind::Started,
                EcuEvent::LimiterCut => VehicleEventKind::LimiterCut,
            });
        }
    }

    /// 3. Actuation: the shift linkages and the clutch pedal's actuator, or the automatic's
    ///    pistons (when the transmission controller runs); brakes, tyre loads, the grade; then
    ///    every input of the coupled solve is written. Follow it with
    ///    [`VehicleControl::solve`].
    pub fn actuate(&mut self, sim: &mut Simulation, c: &Controlled) -> PendingStep {
        let Controlled { t, h, w_engine, v0, reduction, engine: out, .. } = *c;
        let inp = &c.input;
        let events = &mut self.events;
        let mut push = |k| push_event(events, t, k);
        let clamp = match &mut self.trans {
            Trans::Manual(m) if !self.controllers.transmission => sim.input_value(m.ids.clutch_force),
            Trans::Automatic(a) if !self.controllers.transmission => a.lockup_command(sim),
            Trans::Manual(m) => {
                let (cl, gb) =
                    (self.spec.clutch.as_ref().expect("manual"), self.spec.gearbox.as_ref().expect("manual"));
                let idle = self.spec.engine.idle_rpm;
                let c = self.controllers;
                let actuators = manual::Actuators { clutch: c.clutch_actuator, linkages: c.linkages };
                m.actuate(cl, gb, idle, &self.layout, sim, inp, t, h, w_engine, actuators, &mut push)
            }
            Trans::Automatic(a) => a.actuate(sim, self.controllers.pistons),
        };
        let wh = &self.spec.wheels;
        let brake = inp.brake.clamp(0.0, 1.0);
        let park = inp.parking_brake.clamp(0.0, 1.0);
        let rear_max = wh.rear_brake + wh.parking_brake;
        let rear = if rear_max > 0.0 { (brake * wh.rear_brake + park * wh.parking_brake) / rear_max } else { 0.0 };
        if inp.grade.to_bits() != self.slope.0.to_bits() {
            let theta = inp.grade.atan();
            self.slope = (inp.grade, theta.sin(), theta.cos());
        }
        let (_, sin, cos) = self.slope;
        let loads = if self.ids.ground_in.is_some() {
            self.contact.map(|c| c.1)
        } else if self.ids.chassis.is_some() {
            self.chassis.wheels.map(|c| if c.contact.in_contact { c.contact.load } else { 0.0 })
        } else {
            self.loads(sin, cos, self.accel)
        };
        // 4. Inputs for the coupled solve.
        if self.controllers.engine {
            set(sim, self.ids.throttle, out.throttle);
            set(sim, self.ids.starter, out.starter);
        }
        if let Some(g) = self.ids.grade {
            set(sim, g, -self.spec.body.mass * G * sin);
        }
        if let Some(ground) = self.ids.ground_in {
            for k in 0..4 {
                let (v, _, a) = self.contact[k];
                let _ = sim.set_input_ramp_id(ground[k], v, a);
            }
        }
        for k in 0..4 {
            set(sim, self.ids.brake_in[k], if k < 2 { brake } else { rear });
            // Road friction scales the tyre's force: the simplified Magic Formula is linear in load.
            set(sim, self.ids.load_in[k], loads[k] * self.surface[k]);
        }
        if let Some(c) = self.ids.chassis {
            self.chassis.actuate(sim, &c, h);
            for k in 0..4 {
                let load = self.chassis.tyre_load(k, &self.spec.wheels.combined);
                set(sim, self.ids.load_in[k], load * self.surface[k]);
            }
        }
        self.last_loads = loads;
        PendingStep { v0, throttle: out.throttle, reduction, clamp }
    }

    /// Steps 4 and 5: the coupled solve of a (sub-)step of `h` seconds and what follows it. First
    /// the caller's overrides are written over the actuators' inputs: `engagements` (a clutch's
    /// or shift element's normalised force, clamped to [0, 1], NaN skipped; see
    /// [`VehicleControl::step_with`]) and `inputs` (any run-time input, under the input policy
    /// of [`Simulation::set_input_id`]). Then [`Simulation::step`] and
    /// [`VehicleControl::after_step`]. A refused solve leaves the simulation where it was; the
    /// controllers still see its end, and the error is returned.
    pub fn solve(
        &mut self,
        sim: &mut Simulation,
        tel: &mut Telemetry,
        mut pending: PendingStep,
        h: f64,
        engagements: &[(InputId, f64)],
        inputs: &[(InputId, f64)],
    ) -> Result<(), StepError> {
        for &(id, value) in engagements {
            if value.is_nan() {
                continue;
            }
            let value = value.clamp(0.0, 1.0);
            let _ = sim.set_input_id(id, value);
            if let Trans::Manual(m) = &self.trans
                && m.ids.clutch_force == id
            {
                pending.clamp = value;
            }
        }
        for &(id, value) in inputs {
            let _ = sim.set_input_id(id, value);
            if id == self.ids.throttle {
                pending.throttle = sim.input_value(id);
            }
        }
        let actuated = self.controllers.transmission && self.controllers.clutch_actuator;
        if !inputs.is_empty() && !actuated {
            // What the telemetry reports as the clutch's (or lock-up's) command: the input.
            pending.clamp = match &self.trans {
                Trans::Manual(m) => sim.input_value(m.ids.clutch_force),
                Trans::Automatic(a) => a.lockup_command(sim),
            };
        }
        let solved = sim.step(h);
        self.after_step(sim, tel, pending, h);
        solved
    }

    /// Integrates heat and fuel and updates the telemetry record `tel` after the simulation
    /// stepped.
    pub fn after_step(&mut self, sim: &Simulation, tel: &mut Telemetry, p: PendingStep, dt: f64) {
        let PendingStep { v0, throttle, reduction, clamp } = p;
        self.now = sim.time();
        // 5. Integrate heat and fuel; telemetry.
        if let Trans::Manual(m) = &mut self.trans {
            m.after_step(self.spec.clutch.as_ref().expect("manual"), sim, dt, self.controllers.linkages);
        }
        let v1 = self.vehicle_speed(sim);
        self.accel = (v1 - v0) / dt;
        if self.ids.body.is_none() {
            self.distance += 0.5 * (v0 + v1) * dt;
        }
        if let Some(f) = &self.spec.engine.fuel
            && (self.ecu.running || !self.controllers.engine)
            && throttle > 0.0
        {
            let tq = sim.element_torque(self.ids.engine_torque);
            self.fuel += f.rate(sim.body_state(self.ids.engine).map_or(0.0, |s| s.1) / RPM, tq.max(0.0)) * dt;
        }
        if let Some(c) = self.ids.chassis {
            self.chassis_after_step(sim, &c, dt);
        }
        self.update_telemetry(sim, tel, throttle, reduction, clamp);
    }

    /// [`Road::Chassis`]: each wheel's forces and slip after a (sub-)step of `dt` seconds.
    fn chassis_after_step(&mut self, sim: &Simulation, c: &chassis::ChassisIds, dt: f64) {
        let wh = &self.spec.wheels;
        let tyres = chassis::TyreIds {
            tyres: self.ids.tyres,
            wheels: self.ids.wheels,
            radius: wh.radius,
            mf: &wh.tyre,
            surface: self.surface,
        };
        self.chassis.after_step(sim, c, &tyres, &wh.combined, dt);
    }
}
