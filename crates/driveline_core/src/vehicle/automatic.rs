//! The glue between a vehicle's network and its transmission controller ([`Tcu`]): what the
//! controller reads from the last solution, and the inputs it writes.

use super::EngineSpec;
use super::{Controllers, Ids, Layout, Telemetry, VehicleEventKind, find, id, set};
use crate::automatic::{AutomaticSpec, MAX_ELEMENTS, Tcu, TcuEvent, TcuInput, TcuOutput};
use crate::converter::ConverterMap;
use crate::elements::Law;
use crate::solver::{InputId, Simulation};
use crate::torque_map::RPM;
use crate::torque_map::TorqueMap;
use crate::{DriverInput, FrictionMode};

/// Element and input handles of the automatic.
#[derive(Clone)]
pub(crate) struct AutoIds {
    pub elements: Vec<usize>,
    force_in: Vec<InputId>,
    pub lockup: usize,
    lockup_in: InputId,
    park_in: InputId,
    converter: usize,
    turbine: usize,
}

/// A planetary automatic's controller with its network handles.
#[derive(Clone)]
pub(crate) struct AutoControl {
    pub tcu: Tcu,
    pub ids: AutoIds,
    map: ConverterMap,
    driven: [bool; 4],
    out: TcuOutput,
    engine_map: TorqueMap,
}

impl AutoControl {
    pub fn new(at: &AutomaticSpec, layout: &Layout, engine: &EngineSpec, sim: &Simulation) -> Self {
        let engine_map = engine.map.build().expect("validated");
        let engine_inertia = engine.inertia;
        let net = sim.network();
        let auto = layout.automatic.as_ref().expect("an automatic layout");
        let names = &auto.elements;
        let ids = AutoIds {
            elements: names.iter().map(|n| find(net, n)).collect(),
            force_in: names.iter().map(|n| id(sim, &format!("{n}.force"))).collect(),
            lockup: find(net, "lockup"),
            lockup_in: id(sim, "lockup.force"),
            park_in: id(sim, "park.engage"),
            converter: find(net, "converter"),
            turbine: find(net, "turbine"),
        };
        // The maps as the network's laws hold them, whose tables the vehicles of a file share,
        // when they are the description's (a part edited before the controllers were made
        // is not).
        let mut map = at.converter.build();
        let mut engine_map = engine_map;
        for law in net.elements.iter().filter_map(|e| e.law).map(|l| &net.laws[l]) {
            match law {
                Law::Converter { map: m, .. } if *m == map => map = m.clone(),
                Law::Engine { map: m, .. } if *m == engine_map => engine_map = m.clone(),
                _ => {}
            }
        }
        Self {
            tcu: Tcu::with_tables(at, engine_inertia, auto.gear_tables.clone()),
            ids,
            map,
            driven: layout.driven,
            out: TcuOutput::default(),
            engine_map,
        }
    }

    /// Start inputs: the neutral gear's elements applied, lock-up open, pawl in.
    pub fn start(&mut self, sim: &mut Simulation) {
        for (k, &i) in self.ids.force_in.iter().enumerate() {
            let applied = self.tcu.pressure(k) > 0.0;
            set(sim, i, if applied { 1.0 } else { 0.0 });
        }
        set(sim, self.ids.lockup_in, 0.0);
        set(sim, self.ids.park_in, 1.0);
    }

    /// What the controller sees: the last solution's speeds, torques, modes and powers.
    #[allow(clippy::too_many_arguments)]
    pub fn view(
        &self,
        sim: &Simulation,
        ids: &Ids,
        inp: &DriverInput,
        t: f64,
        dt: f64,
        w_engine: f64,
        speed: f64,
        accel: f64,
    ) -> TcuInput {
        let w = |e: usize| sim.body_state(e).map_or(0.0, |s| s.1);
        let w_input = w(self.ids.turbine);
        let lockup_stuck = sim.element_mode(self.ids.lockup) == Some(FrictionMode::Stuck);
        let turbine = sim.element_torque(self.ids.converter);
        // Static input torque: the converter's turbine torque plus what the lock-up passes (the
        // engine's torque less the pump's load when it is stuck, its friction torque when it
        // slips); the engine's inertia torque is left out on purpose.
        let through_lockup = if lockup_stuck {
            sim.element_torque(ids.engine_torque) + self.map.torques(w_engine, w_input).pump
        } else {
            -sim.element_torque(self.ids.lockup)
        };
        let mut v = TcuInput {
            time: t,
            dt,
            pedal: inp.throttle.clamp(0.0, 1.0),
            selector: inp.selector,
            up: inp.shift_up,
            down: inp.shift_down,
            w_engine,
            w_input,
            w_output: w(ids.output),
            input_torque: turbine + through_lockup,
            demand_torque: self.engine_map.eval(inp.throttle.clamp(0.0, 1.0), w_engine).0,
            lockup_stuck,
            speed,
            accel,
            ..TcuInput::default()
        };
        for (k, &e) in self.ids.elements.iter().take(MAX_ELEMENTS).enumerate() {
            v.stuck[k] = sim.element_mode(e) == Some(FrictionMode::Stuck);
            v.power[k] = sim.element_dissipation(e);
        }
        for k in 0..4 {
            v.wheel_torque += ids.drive[k].map_or(0.0, |e| -sim.element_torque(e));
            if self.driven[k] {
                v.wheel_slip = v.wheel_slip.max(sim.element_relative_speed(ids.tyres[k]).map_or(0.0, f64::abs));
            }
        }
        v
    }

    /// Runs the controller; returns the engine torque reduction it asks for.
    pub fn control(&mut self, at: &AutomaticSpec, view: &TcuInput, push: &mut dyn FnMut(VehicleEventKind)) -> f64 {
        self.out = self.tcu.step(at, view, |e| {
            push(match e {
                TcuEvent::Started { from, to } => VehicleEventKind::ShiftStarted { from, to },
                TcuEvent::Completed(r) => {
                    VehicleEventKind::ShiftCompleted { gear: r.to, duration: r.duration, report: Some(r) }
                }
                TcuEvent::ParkRatchet => VehicleEventKind::ParkRatchet,
                TcuEvent::Refused { gear } => VehicleEventKind::ShiftRefused { gear },
            })
        });
        self.out.reduction
    }

    /// Writes the element, lock-up and pawl forces; returns the lock-up command.
    pub fn actuate(&self, sim: &mut Simulation, pistons: u64) -> f64 {
        for (k, &i) in self.ids.force_in.iter().enumerate().take(MAX_ELEMENTS) {
            if pistons & 1 << k != 0 {
                set(sim, i, self.out.force[k]);
            }
        }
        set(sim, self.ids.lockup_in, self.out.lockup);
        set(sim, self.ids.park_in, self.out.park);
        self.out.lockup
    }

    /// The lock-up command as its input holds it (the TCU's, or whoever wrote it last).
    pub fn lockup_command(&self, sim: &Simulation) -> f64 {
        sim.input_value(self.ids.lockup_in)
    }

    pub fn telemetry(&self, sim: &Simulation, t: &mut Telemetry, controllers: Controllers) {
        t.turbine_rpm = sim.body_state(self.ids.turbine).map_or(0.0, |s| s.1) / RPM;
        t.converter_torque = sim.element_torque(self.ids.converter);
        t.lockup_engagement = self.tcu.lockup();
        t.lockup_locked = sim.element_mode(self.ids.lockup) == Some(FrictionMode::Stuck);
        t.lockup_mode = self.tcu.lockup_mode();
        t.shift_phase = self.tcu.phase();
        t.selector = self.tcu.selector();
        t.selected_gear = self.tcu.target().unwrap_or(self.tcu.gear());
        t.clutch_slip = sim.element_relative_speed(self.ids.lockup).unwrap_or(0.0);
        t.clutch_torque = sim.element_torque(self.ids.lockup);
        t.clutch_power = sim.element_dissipation(self.ids.lockup);
        for (k, &e) in self.ids.elements.iter().take(MAX_ELEMENTS).enumerate() {
            t.elements[k] = crate::automatic::ElementTelemetry {
                present: true,
                pressure: self.tcu.pressure(k),
                // (An element without its piston: the force it was given.)
                force: if controllers.transmission && controllers.pistons & 1 << k != 0 {
                    self.out.force[k]
                } else {
                    sim.input_value(self.ids.force_in[k])
                },
                torque: sim.element_torque(e),
                slip: sim.element_relative_speed(e).unwrap_or(0.0),
                temperature: self.tcu.temperatures()[k],
                locked: sim.element_mode(e) == Some(FrictionMode::Stuck),
            };
        }
    }
}

// The handles, converter map and engine map follow from the description.
crate::snapshot::persist_fields!(AutoControl { tcu, out });
