//! The hydraulic piston of a wet shift element: a valve whose pressure follows the controller's
//! command with a lag, a fill (stroke) phase in which the piston takes up the pack clearance
//! against its return spring, then the clamp force `F_n = A p - F_spring`.

use super::gearbox::ShiftElementSpec;

/// State of one piston.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Piston {
    /// Stroke taken up, as a fraction of the clearance, [0, 1]; 1 = the plates touch.
    pub fill: f64,
    /// Chamber pressure, Pa.
    pub pressure: f64,
}

impl Piston {
    /// A piston already stroked and at full pressure (the elements closed at start).
    pub fn applied(e: &ShiftElementSpec) -> Self {
        Self { fill: 1.0, pressure: e.max_pressure }
    }

    /// Pressure at which the piston just overcomes its return spring, Pa.
    pub fn kiss_pressure(e: &ShiftElementSpec) -> f64 {
        e.return_spring / e.piston_area
    }

    /// Pressure that gives a kinetic torque capacity `torque` (N m) once filled, Pa (clamped to
    /// the line pressure).
    pub fn pressure_for(e: &ShiftElementSpec, torque: f64) -> f64 {
        let f = torque.max(0.0) / (e.mu.eval(0.0) * e.cgeo()).max(1e-12);
        ((f + e.return_spring) / e.piston_area).min(e.max_pressure)
    }

    /// Advances by `dt` with the pressure `command` (Pa) and valve lag `lag` (s); returns the
    /// normalised clamp force `F_n / F_n,max` in [0, 1].
    ///
    /// Above the kiss pressure the piston strokes at the fill flow (`dx/dt = Q / (A c)`) and the
    /// chamber cannot build more than the spring pressure until it is full; below it the
    /// spring pushes the oil out at the same rate. The pressure's first-order response is
    /// integrated exactly over the step, so any step size is stable.
    pub fn step(&mut self, e: &ShiftElementSpec, command: f64, lag: f64, dt: f64) -> f64 {
        self.step_with_response(e, command, Self::response(lag, dt), dt)
    }

    /// The fraction of a pressure difference the valve closes in `dt` with lag `lag`:
    /// `1 - exp(-dt / lag)`.
    pub fn response(lag: f64, dt: f64) -> f64 {
        1.0 - (-dt / lag).exp()
    }

    /// [`Piston::step`] with the valve's [`Piston::response`] for this step already known (the
    /// same for every piston of a gearbox: one exponential a step instead of one per piston).
    pub fn step_with_response(&mut self, e: &ShiftElementSpec, command: f64, a: f64, dt: f64) -> f64 {
        self.step_with(&PistonConstants::of(e), command, a, dt)
    }

    /// [`Piston::step_with_response`] with the element's constants formed once
    /// ([`PistonConstants::of`]): the same law, the same values.
    pub fn step_with(&mut self, c: &PistonConstants, command: f64, a: f64, dt: f64) -> f64 {
        let cmd = if command.is_finite() { command.clamp(0.0, c.max_pressure) } else { 0.0 };
        let rate = dt / c.fill_time;
        self.fill = if cmd > c.kiss { (self.fill + rate).min(1.0) } else { (self.fill - rate).max(0.0) };
        self.pressure += (cmd - self.pressure) * a;
        if self.fill < 1.0 {
            self.pressure = self.pressure.min(c.kiss);
        }
        self.force_with(c)
    }

    /// Normalised clamp force at the present state.
    pub fn force(&self, e: &ShiftElementSpec) -> f64 {
        self.force_with(&PistonConstants::of(e))
    }

    /// [`Piston::force`] with the element's constants formed once.
    pub fn force_with(&self, c: &PistonConstants) -> f64 {
        if self.fill < 1.0 {
            return 0.0;
        }
        ((c.piston_area * self.pressure - c.return_spring) / c.max_force).clamp(0.0, 1.0)
    }
}

/// What a piston's step reads of its element, formed once per element (each value as the
/// element's own method forms it, so a step with them is the same, bit for bit).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PistonConstants {
    /// [`Piston::kiss_pressure`], Pa.
    pub kiss: f64,
    /// [`ShiftElementSpec::fill_time`], s.
    pub fill_time: f64,
    /// Line pressure, Pa.
    pub max_pressure: f64,
    /// Piston area, m^2.
    pub piston_area: f64,
    /// Return spring force, N.
    pub return_spring: f64,
    /// [`ShiftElementSpec::max_force`], N.
    pub max_force: f64,
}

impl PistonConstants {
    /// The constants of element `e`.
    pub fn of(e: &ShiftElementSpec) -> Self {
        Self {
            kiss: Piston::kiss_pressure(e),
            fill_time: e.fill_time(),
            max_pressure: e.max_pressure,
            piston_area: e.piston_area,
            return_spring: e.return_spring,
            max_force: e.max_force(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Table1D;

    fn element() -> ShiftElementSpec {
        ShiftElementSpec {
            name: "A".into(),
            connects: ("a".into(), "housing".into()),
            mu: Table1D::constant(0.1),
            peak: 1.05,
            surfaces: 8,
            outer_radius: 0.11,
            inner_radius: 0.09,
            piston_area: 0.01,
            max_pressure: 2e6,
            return_spring: 1000.0,
            clearance: 1.5e-3,
            fill_flow: 1.5e-4,
        }
    }

    #[test]
    fn no_force_until_the_clearance_is_taken_up() {
        let e = element();
        assert!((e.fill_time() - 0.1).abs() < 1e-12);
        let mut p = Piston::default();
        let mut t = 0.0;
        while t < 0.099 {
            assert_eq!(p.step(&e, 1e6, 0.01, 1e-3), 0.0, "t {t}");
            t += 1e-3;
        }
        // Filled at 0.1 s; the pressure then rises from the spring pressure with the valve lag.
        let mut f = 0.0;
        for _ in 0..200 {
            f = p.step(&e, 1e6, 0.01, 1e-3);
        }
        // A p - F_s over A p_max - F_s: (1e4 - 1e3) / (2e4 - 1e3).
        assert!((f - 9.0 / 19.0).abs() < 1e-6, "{f}");
    }

    #[test]
    fn pressure_for_a_torque_inverts_the_capacity() {
        let e = element();
        let p = Piston::pressure_for(&e, 500.0);
        let fnn = e.piston_area * p - e.return_spring;
        assert!((0.1 * e.cgeo() * fnn - 500.0).abs() < 1e-9);
        assert_eq!(Piston::pressure_for(&e, 1e9), e.max_pressure);
    }

    #[test]
    fn releasing_drains_the_piston_at_any_step() {
        let e = element();
        let mut p = Piston::applied(&e);
        assert_eq!(p.force(&e), 1.0);
        // A 1/60 s step is as stable as a 1 ms one.
        for _ in 0..12 {
            p.step(&e, 0.0, 0.01, 1.0 / 60.0);
        }
        assert_eq!(p.force(&e), 0.0);
        assert_eq!(p.fill, 0.0);
    }
}

crate::snapshot::persist_fields!(Piston { fill, pressure });
