//! The controllers of a manual or sequential gearbox: gear selection, interlock, auto-clutch,
//! auto-blip and ignition cut, the shift linkages, the driver's clutch and its heat.

use super::linkage::{LinkageEvent, SideView, Sleeve, SleeveParams};
use super::{ClutchSpec, DriverInput, GearboxKind, GearboxSpec, Layout, VehicleEventKind, id};
use crate::network::Network;
use crate::solver::{InputId, Simulation};
use crate::torque_map::RPM;

/// Element and input handles of the manual transmission.
#[derive(Clone)]
pub(crate) struct ManualIds {
    pub clutch: usize,
    pub dogs: Vec<usize>,
    pub clutch_force: InputId,
    pub dog_in: Vec<InputId>,
    pub synchro_in: Vec<Option<InputId>>,
    /// Each gear's synchroniser cone element, if the box has synchros.
    pub synchros: Vec<Option<usize>>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Shift {
    from: i32,
    to: i32,
    start: f64,
}

/// Manual or sequential gearbox with a driver's clutch.
#[derive(Clone)]
pub(crate) struct Manual {
    pub ids: ManualIds,
    params: SleeveParams,
    sleeves: Vec<Sleeve>,
    pub selected: i32,
    shift: Option<Shift>,
    /// Auto-clutch: time the last shift completed (release ramp).
    released_at: f64,
    last_up: bool,
    last_down: bool,
    pub temperature: f64,
    last_clutch_power: f64,
    engagement: Vec<f64>,
    /// Energy each gear's synchroniser has dissipated, J, and its power at the last step end, W.
    pub synchro_energy: Vec<f64>,
    last_synchro_power: Vec<f64>,
    /// Some cone was pressed this step, or some synchroniser still dissipated at the last step
    /// end: only then is their power integrated.
    synchros_live: bool,
}

/// Which of the box's actuators write their inputs (see `Controllers`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Actuators {
    /// The clutch actuator writes `clutch.force`.
    pub clutch: bool,
    /// Bit `k`: gear `k`'s linkage writes its dog's and synchroniser's inputs.
    pub linkages: u64,
}

/// What the gear selection hands to the engine controller.
pub(crate) struct Selection {
    pub throttle: f64,
    pub reduction: f64,
}

impl Manual {
    /// Hints the buffers the controller points to toward the cache (`Vehicle::prefetch_stage`;
    /// its own bytes are hinted with the box that holds it). Changes nothing.
    pub(crate) fn prefetch_buffers(&self) {
        use crate::prefetch::slice;
        slice(&self.sleeves);
        slice(&self.engagement);
        slice(&self.synchro_energy);
        slice(&self.last_synchro_power);
    }

    pub fn new(cl: &ClutchSpec, gb: &GearboxSpec, layout: &Layout, net: &Network, sim: &Simulation) -> Self {
        let find = |n: &str| super::find(net, n);
        let ids = ManualIds {
            clutch: find("clutch"),
            dogs: layout.gears.iter().map(|g| find(&g.dog)).collect(),
            clutch_force: id(sim, "clutch.force"),
            dog_in: layout.gears.iter().map(|g| id(sim, &format!("{}.engagement", g.dog))).collect(),
            synchro_in: layout
                .gears
                .iter()
                .map(|g| g.synchro.as_ref().map(|s| id(sim, &format!("{s}.force"))))
                .collect(),
            synchros: layout.gears.iter().map(|g| g.synchro.as_ref().map(|s| find(s))).collect(),
        };
        Self {
            ids,
            params: SleeveParams { linkage: gb.linkage, dog: gb.dog, synchro: gb.synchro, force: gb.shift_force },
            sleeves: vec![Sleeve::default(); layout.sleeves],
            selected: 0,
            shift: None,
            released_at: f64::NEG_INFINITY,
            last_up: false,
            last_down: false,
            temperature: cl.thermal.ambient,
            last_clutch_power: 0.0,
            engagement: vec![0.0; layout.gears.len()],
            synchro_energy: vec![0.0; layout.gears.len()],
            last_synchro_power: vec![0.0; layout.gears.len()],
            synchros_live: false,
        }
    }

    pub fn sleeves(&self) -> &[Sleeve] {
        &self.sleeves
    }

    fn gear_index(layout: &Layout, gear: i32) -> Option<usize> {
        layout.gears.iter().position(|g| g.gear == gear)
    }

    /// Gear whose dogs are fully in, 0 if none.
    pub fn engaged_gear(&self, layout: &Layout) -> i32 {
        self.engagement.iter().position(|&e| e >= 1.0).map_or(0, |k| layout.gears[k].gear)
    }

    /// A shift is asked for by `inp`, in progress, or a sleeve still moves: the linkage is
    /// working.
    pub fn shifting(&self, gb: Option<&GearboxSpec>, inp: &DriverInput) -> bool {
        let asked = match gb.map(|g| g.kind) {
            Some(GearboxKind::Sequential) => (inp.shift_up && !self.last_up) || (inp.shift_down && !self.last_down),
            _ => inp.gear != self.selected,
        };
        asked || self.shift.is_some() || self.sleeves.iter().any(|s| !s.is_still())
    }

    /// Control: the gear asked for, the shift it starts, and the engine torque requests
    /// (ignition cut for a dog-box upshift, blip for a downshift).
    #[allow(clippy::too_many_arguments)]
    pub fn select(
        &mut self,
        gb: &GearboxSpec,
        layout: &Layout,
        sim: &Simulation,
        output: usize,
        inp: &DriverInput,
        t: f64,
        w_engine: f64,
        push: &mut dyn FnMut(VehicleEventKind),
    ) -> Selection {
        let requested = match gb.kind {
            GearboxKind::Manual => inp.gear,
            GearboxKind::Sequential => {
                // The barrel order: R, N, 1, 2, ...
                let g = self.selected;
                let top = gb.ratios.len() as i32;
                let low = if gb.reverse.is_some() { -1 } else { 0 };
                let next = |g: i32| if g == -1 { 0 } else { (g + 1).min(top) };
                let prev = |g: i32| if g <= 0 { low } else { g - 1 };
                if inp.shift_up && !self.last_up {
                    next(g)
                } else if inp.shift_down && !self.last_down {
                    prev(g)
                } else {
                    g
                }
            }
        };
        self.last_up = inp.shift_up;
        self.last_down = inp.shift_down;
        let target = if requested == 0 || Self::gear_index(layout, requested).is_some() {
            requested
        } else {
            if requested != self.selected {
                push(VehicleEventKind::NoSuchGear { gear: requested });
            }
            self.selected
        };
        if target != self.selected {
            let from = self.engaged_gear(layout);
            self.shift = Some(Shift { from, to: target, start: t });
            self.selected = target;
            push(VehicleEventKind::ShiftStarted { from, to: target });
        }
        let shifter = gb.shifter;
        // A sequential actuator gives up; a driver's hand keeps pushing.
        if let Some(s) = self.shift
            && gb.kind == GearboxKind::Sequential
            && t - s.start > shifter.timeout
        {
            push(VehicleEventKind::ShiftAborted { gear: s.to });
            self.shift = None;
            self.selected = 0;
        }
        // Torque reduction and blip.
        let output_w = sim.body_state(output).map_or(0.0, |s| s.1);
        let mut reduction = 0.0;
        let mut throttle = inp.throttle;
        if let Some(s) = self.shift {
            let up = s.to > s.from && s.from > 0;
            let loaded_dog_out = gb.kind == GearboxKind::Sequential;
            if up && loaded_dog_out && shifter.ignition_cut {
                reduction = 1.0;
            }
            let down = s.to > 0 && (s.to < s.from || s.from == 0);
            if down
                && shifter.auto_blip
                && let Some(k) = Self::gear_index(layout, s.to)
            {
                let w_target = output_w * layout.gears[k].ratio;
                if w_target > 0.0 {
                    let blip = (3.0 * (w_target - w_engine) / w_target).clamp(0.0, 1.0);
                    throttle = throttle.max(blip);
                }
            }
        }
        Selection { throttle, reduction }
    }

    /// Actuation: the shift linkages (dog engagement, synchroniser cone forces, for the gears
    /// whose bit `actuators.linkages` sets) and, with `actuators.clutch`, the clutch clamp force
    /// from the pedal (auto-clutch, fade). Returns the clamp force written (without the
    /// actuator: the one the input holds). A gear whose linkage does not write takes its dog's
    /// engagement from the input, as written last.
    #[allow(clippy::too_many_arguments)]
    pub fn actuate(
        &mut self,
        cl: &ClutchSpec,
        gb: &GearboxSpec,
        idle_rpm: f64,
        layout: &Layout,
        sim: &mut Simulation,
        inp: &DriverInput,
        t: f64,
        dt: f64,
        w_engine: f64,
        actuators: Actuators,
        push: &mut dyn FnMut(VehicleEventKind),
    ) -> f64 {
        let sel = Self::gear_index(layout, self.selected);
        let sel_sleeve = sel.map(|k| layout.gears[k].sleeve);
        let others_neutral = |sleeves: &[Sleeve], p: &SleeveParams, j: usize| {
            sleeves.iter().enumerate().all(|(i, s)| i == j || s.is_neutral(p))
        };
        let full = self.params.full();
        for j in 0..self.sleeves.len() {
            let target = match sel {
                Some(k) if sel_sleeve == Some(j) && others_neutral(&self.sleeves, &self.params, j) => {
                    layout.gears[k].side * (full + 0.002)
                }
                _ => 0.0,
            };
            // A sleeve at rest (in neutral, or settled in gear) for this target does not look
            // at its dogs: no need to read them.
            let mut view = [SideView::default(); 2];
            if !self.sleeves[j].at_rest_for(target) {
                for (k, g) in layout.gears.iter().enumerate() {
                    if g.sleeve == j {
                        let side = if g.side > 0.0 { 0 } else { 1 };
                        let (phi, w) = sim.element_relative(self.ids.dogs[k]).unwrap_or((0.0, 0.0));
                        // The dog's relative coordinate is output - idler; the linkage wants
                        // idler - output.
                        let torque = sim.element_torque(self.ids.dogs[k]);
                        view[side] = SideView { present: true, slip: -w, angle: -phi, torque };
                    }
                }
            }
            let mut lev = [None; 4];
            let mut nl = 0;
            let o = self.sleeves[j].step(&self.params, target, view, dt, |e| {
                if nl < 4 {
                    lev[nl] = Some(e);
                    nl += 1;
                }
            });
            for (k, g) in layout.gears.iter().enumerate() {
                if g.sleeve != j {
                    continue;
                }
                let side = if g.side > 0.0 { 0 } else { 1 };
                if k < 64 && actuators.linkages & 1 << k == 0 {
                    self.engagement[k] = sim.input_value(self.ids.dog_in[k]);
                    continue;
                }
                self.engagement[k] = o.engagement[side];
                let _ = sim.set_input_id(self.ids.dog_in[k], o.engagement[side]);
                if let Some(id) = self.ids.synchro_in[k] {
                    self.synchros_live |= o.cone_force[side] != 0.0;
                    let _ = sim.set_input_id(id, o.cone_force[side]);
                }
            }
            for e in lev.into_iter().flatten() {
                let side_of = |s: usize| {
                    layout.gears.iter().find(|g| g.sleeve == j && (g.side > 0.0) == (s == 0)).map_or(0, |g| g.gear)
                };
                push(match e {
                    LinkageEvent::Blocked(s) => VehicleEventKind::ShiftBlocked { gear: side_of(s) },
                    LinkageEvent::Passed(s) => VehicleEventKind::DogEngaged { gear: side_of(s) },
                    LinkageEvent::Indexed(s) => VehicleEventKind::SynchroIndexed { gear: side_of(s) },
                });
            }
        }
        if let Some(s) = self.shift {
            let done = match Self::gear_index(layout, s.to) {
                Some(k) => self.engagement[k] >= 1.0,
                None => self.sleeves.iter().all(|sl| sl.is_neutral(&self.params)),
            };
            if done {
                push(VehicleEventKind::ShiftCompleted { gear: s.to, duration: t + dt - s.start, report: None });
                self.shift = None;
                self.released_at = t + dt;
            }
        }
        // Clutch pedal, auto-clutch, fade (without the actuator: the force as written last).
        if !actuators.clutch {
            return sim.input_value(self.ids.clutch_force);
        }
        let shifter = gb.shifter;
        let mut pedal = inp.clutch.clamp(0.0, 1.0);
        if shifter.auto_clutch {
            let n = w_engine / RPM;
            let launch = ((n - 1.1 * idle_rpm) / 1200.0).clamp(0.0, 1.0);
            // Launch and anti-stall: the clutch bites as the engine pulls above idle.
            let mut auto = cl.bite_point * (1.0 - launch);
            // An H-pattern box needs the clutch for every shift; a dog box shifts without it.
            if self.shift.is_some() && gb.kind == GearboxKind::Manual {
                auto = 1.0;
            } else if gb.kind == GearboxKind::Manual {
                // Let the pedal up linearly after a shift.
                let since = ((t - self.released_at) / shifter.clutch_release_time).max(0.0);
                auto = auto.max(1.0 - since);
            }
            pedal = pedal.max(auto);
        }
        let fade = cl.thermal.fade.as_ref().map_or(1.0, |f| f.eval(self.temperature));
        let clamp = cl.clamp_fraction(pedal) * fade;
        let _ = sim.set_input_id(self.ids.clutch_force, clamp);
        clamp
    }

    /// Clutch heat after the step: `C dT/dt = P - h (T - T_a)`, implicit in the cooling term;
    /// the synchronisers' dissipated energy (trapezoidal in their power). The engagement of a
    /// dog its linkage does not drive (a clear bit of `linkages`) is the one the step used.
    pub fn after_step(&mut self, cl: &ClutchSpec, sim: &Simulation, dt: f64, linkages: u64) {
        if linkages != u64::MAX {
            for (k, e) in self.engagement.iter_mut().enumerate().take(64) {
                if linkages & 1 << k == 0 {
                    *e = sim.input_value(self.ids.dog_in[k]);
                }
            }
        }
        if self.synchros_live {
            let mut live = false;
            let synchros = self.ids.synchros.iter();
            for ((e, last), el) in self.synchro_energy.iter_mut().zip(&mut self.last_synchro_power).zip(synchros) {
                if let Some(el) = *el {
                    let p = sim.element_dissipation(el);
                    *e += 0.5 * (p + *last) * dt;
                    *last = p;
                    live |= p != 0.0;
                }
            }
            self.synchros_live = live;
        }
        let th = &cl.thermal;
        let p1 = sim.element_dissipation(self.ids.clutch);
        let p = 0.5 * (p1 + self.last_clutch_power);
        self.last_clutch_power = p1;
        self.temperature = (self.temperature + dt / th.heat_capacity * (p + th.cooling * th.ambient))
            / (1.0 + dt * th.cooling / th.heat_capacity);
    }
}

crate::snapshot::persist_fields!(Shift { from, to, start });
// The element handles and linkage parameters follow from the description.
crate::snapshot::persist_fields!(Manual {
    sleeves,
    selected,
    shift,
    released_at,
    last_up,
    last_down,
    temperature,
    last_clutch_power,
    engagement,
    synchro_energy,
    last_synchro_power,
    synchros_live,
});
