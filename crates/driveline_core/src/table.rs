//! One-dimensional tables with linear interpolation (the MSL `mu_pos`, `tau_pos` tables).

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A table `y(x)` over strictly increasing abscissae, linearly interpolated and held constant
/// beyond its ends (MSL `Tables.CombiTable1D` with `extrapolation = HoldLastPoint`).
///
/// # Example
/// ```
/// use driveline_core::Table1D;
/// let mu = Table1D::new(vec![(0.0, 0.5), (10.0, 0.4)]).unwrap();
/// assert_eq!(mu.eval(5.0), 0.45);
/// assert_eq!(mu.eval(50.0), 0.4);
/// ```
///
/// A table never changes once built, and its rows are shared: a clone (a vehicle's copy of
/// its description's friction table, a part component's) refers to the same rows, so the
/// vehicles of one file hold one copy of each table between them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(from = "Vec<(f64, f64)>", into = "Vec<(f64, f64)>")]
pub struct Table1D {
    points: Arc<[(f64, f64)]>,
    /// Search start per bucket of the abscissa range (tables of more than [`SCAN_ROWS`] rows;
    /// empty otherwise): a long table (a converter's 29 speed ratios) is looked up in one or
    /// two comparisons instead of a scan over its rows.
    buckets: Arc<[u32]>,
    /// Buckets per unit of x.
    bucket_scale: f64,
    /// Slope of each segment, `(y_i - y_{i-1}) / (x_i - x_{i-1})` at `i - 1`: formed once, so
    /// a lookup multiplies where it would divide (the same quotient, bit for bit).
    slopes: Arc<[f64]>,
}

/// Where an abscissa lies in a [`Table1D`] ([`Table1D::locate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locus {
    /// At or before the first row (or the table has one row): the first value, slope 0.
    First,
    /// At or after the last row: the last value, slope 0.
    Last,
    /// Strictly between rows `i - 1` and `i`.
    Before(u32),
}

/// Tables of at most this many rows are scanned (a few comparisons, no index).
const SCAN_ROWS: usize = 8;

impl PartialEq for Table1D {
    /// Tables are equal when their rows are (the bucket index follows from the rows).
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.points, &other.points) || self.points == other.points
    }
}

impl From<Vec<(f64, f64)>> for Table1D {
    /// The rows as they are (deserialised tables are checked by [`Table1D::validate`] after).
    fn from(points: Vec<(f64, f64)>) -> Self {
        let (buckets, bucket_scale, slopes) = Self::index(&points);
        Self { points: points.into(), buckets: buckets.into(), bucket_scale, slopes: slopes.into() }
    }
}

impl From<Table1D> for Vec<(f64, f64)> {
    fn from(t: Table1D) -> Self {
        t.points.to_vec()
    }
}

/// What is wrong with a table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TableError {
    /// No rows at all.
    #[error("the table is empty; give at least one row (x, y)")]
    Empty,
    /// A value is NaN or infinite.
    #[error("row {row} holds a non-finite value; every x and y must be a finite number")]
    NotFinite {
        /// Zero-based row index.
        row: usize,
    },
    /// Abscissae do not increase.
    #[error("x must increase strictly from row to row, but row {row} has x = {x} after {prev}")]
    NotIncreasing {
        /// Zero-based row index.
        row: usize,
        /// The offending abscissa.
        x: f64,
        /// The abscissa of the row before.
        prev: f64,
    },
}

impl Table1D {
    /// Builds a table after checking that it is non-empty, finite and strictly increasing in x.
    pub fn new(points: Vec<(f64, f64)>) -> Result<Self, TableError> {
        let t = Self::from(points);
        t.validate()?;
        Ok(t)
    }

    /// A constant table `y(x) = y`.
    pub fn constant(y: f64) -> Self {
        Self::from(vec![(0.0, y)])
    }

    /// Forms the segment slopes, and builds the bucket index of a long, valid table: `2 n`
    /// buckets of equal width over the abscissa range, each holding the first row at or right
    /// of its left edge. Any start gives the same row (the lookup walks to it), so rounding in
    /// the bucket arithmetic can cost a comparison, never change a result. Invalid tables get
    /// no index (and are never evaluated: they fail validation). Returns the buckets, their
    /// scale and the slopes of rows `p`.
    fn index(p: &[(f64, f64)]) -> (Vec<u32>, f64, Vec<f64>) {
        let slopes = p.windows(2).map(|s| (s[1].1 - s[0].1) / (s[1].0 - s[0].0)).collect();
        if p.len() <= SCAN_ROWS || Self::check(p).is_err() {
            return (Vec::new(), 0.0, slopes);
        }
        let (x0, x1) = (p[0].0, p[p.len() - 1].0);
        let nb = 2 * p.len();
        let scale = nb as f64 / (x1 - x0);
        if !scale.is_finite() {
            return (Vec::new(), 0.0, slopes);
        }
        let mut i = 1;
        let mut buckets = Vec::with_capacity(nb);
        for b in 0..nb {
            let edge = x0 + b as f64 / scale;
            while i < p.len() - 1 && p[i].0 < edge {
                i += 1;
            }
            buckets.push(i as u32);
        }
        (buckets, scale, slopes)
    }

    /// Checks the invariants [`Table1D::new`] enforces (deserialised tables call this).
    pub fn validate(&self) -> Result<(), TableError> {
        Self::check(&self.points)
    }

    /// [`Table1D::validate`] of rows `points`.
    fn check(points: &[(f64, f64)]) -> Result<(), TableError> {
        if points.is_empty() {
            return Err(TableError::Empty);
        }
        for (i, &(x, y)) in points.iter().enumerate() {
            if !x.is_finite() || !y.is_finite() {
                return Err(TableError::NotFinite { row: i });
            }
            if i > 0 && x <= points[i - 1].0 {
                return Err(TableError::NotIncreasing { row: i, x, prev: points[i - 1].0 });
            }
        }
        Ok(())
    }

    /// The rows `(x, y)`.
    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }

    /// True when every y is the same, so the table is a constant.
    pub fn is_constant(&self) -> bool {
        self.points.iter().all(|p| p.1 == self.points[0].1)
    }

    /// Linear interpolation at `x`, held constant beyond the ends.
    #[inline]
    pub fn eval(&self, x: f64) -> f64 {
        self.eval_with_slope(x).0
    }

    /// Value and slope `dy/dx` at `x` (slope 0 beyond the ends).
    #[inline]
    pub fn eval_with_slope(&self, x: f64) -> (f64, f64) {
        self.at(self.locate(x), x)
    }

    /// Where `x` lies among the rows (the search of [`Table1D::eval_with_slope`]): a table over
    /// the same abscissae is evaluated at the same place by [`Table1D::at`] without a search of
    /// its own (a converter's capacity and torque ratio over one speed-ratio grid).
    #[inline]
    pub fn locate(&self, x: f64) -> Locus {
        let p = &self.points;
        // The ends (a constant table, a slip of zero) are inlined at the caller; the search
        // between the rows is not.
        if p.len() == 1 || x <= p[0].0 {
            return Locus::First;
        }
        if x >= p[p.len() - 1].0 {
            return Locus::Last;
        }
        Locus::Before(self.between_rows(x))
    }

    /// Value and slope at `x`, which lies at `locus` ([`Table1D::locate`] of this table, or of
    /// one with the same abscissae: [`Table1D::same_abscissae`]).
    #[inline]
    pub fn at(&self, locus: Locus, x: f64) -> (f64, f64) {
        let p = &self.points;
        match locus {
            Locus::First => (p[0].1, 0.0),
            Locus::Last => (p[p.len() - 1].1, 0.0),
            Locus::Before(i) => self.segment(i as usize, x),
        }
    }

    /// Value and slope at `x` on the segment from row `i - 1` to row `i`.
    #[inline]
    fn segment(&self, i: usize, x: f64) -> (f64, f64) {
        let (x0, y0) = self.points[i - 1];
        let s = self.slopes[i - 1];
        (y0 + s * (x - x0), s)
    }

    /// True when both tables have the same rows' abscissae, so that a [`Locus`] of one is the
    /// same place in the other.
    pub fn same_abscissae(&self, other: &Table1D) -> bool {
        Arc::ptr_eq(&self.points, &other.points)
            || self.points.len() == other.points.len()
                && self.points.iter().zip(other.points.iter()).all(|(a, b)| a.0 == b.0)
    }

    /// The row strictly after `x`, for `x` strictly between the first and the last row: the
    /// first row `i >= 1` with `x <= x_i`.
    #[inline(never)]
    fn between_rows(&self, x: f64) -> u32 {
        let p = &self.points;
        // Short tables are scanned from the start; long ones from their bucket's start,
        // stepping back first should rounding have put x just left of the bucket's edge.
        let mut i = 1;
        if !self.buckets.is_empty() {
            let b = ((x - p[0].0) * self.bucket_scale) as usize;
            i = self.buckets[b.min(self.buckets.len() - 1)] as usize;
            while i > 1 && p[i - 1].0 >= x {
                i -= 1;
            }
        }
        while p[i].0 < x {
            i += 1;
        }
        i as u32
    }

    /// Smallest and largest y.
    pub fn y_range(&self) -> (f64, f64) {
        self.points.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_non_monotonic() {
        let e = Table1D::new(vec![(0.0, 1.0), (2.0, 1.0), (1.0, 0.0)]).unwrap_err();
        assert!(matches!(e, TableError::NotIncreasing { row: 2, .. }));
    }

    /// The bucket index of a long table must pick the same row pair as a scan from the start,
    /// so that indexed and scanned lookups agree bit for bit, at the rows, between them and
    /// one ulp either side of every row (where rounding in the bucket arithmetic could err).
    #[test]
    fn indexed_lookup_equals_the_scan() {
        let xs: [f64; 14] = [0.0, 0.01, 0.02, 0.03, 0.1, 0.15, 0.2, 0.5, 0.55, 0.6, 0.61, 0.9, 0.95, 1.0];
        let t = Table1D::new(xs.iter().map(|&x| (x, (7.0 * x).sin() + x * x)).collect()).unwrap();
        assert!(!t.buckets.is_empty(), "a 14-row table is indexed");
        let scan = |x: f64| {
            let p = t.points();
            if x <= p[0].0 {
                return (p[0].1, 0.0);
            }
            if x >= p[p.len() - 1].0 {
                return (p[p.len() - 1].1, 0.0);
            }
            let i = p.iter().position(|r| r.0 >= x).unwrap();
            let s = (p[i].1 - p[i - 1].1) / (p[i].0 - p[i - 1].0);
            (p[i - 1].1 + s * (x - p[i - 1].0), s)
        };
        let mut probes: Vec<f64> = (0..=2000).map(|k| -0.1 + 1.2 * k as f64 / 2000.0).collect();
        for &x in &xs {
            probes.extend([x, f64::from_bits(x.to_bits() + 1), f64::from_bits(x.to_bits().max(1) - 1)]);
        }
        for x in probes {
            let (a, b) = (t.eval_with_slope(x), scan(x));
            assert_eq!((a.0.to_bits(), a.1.to_bits()), (b.0.to_bits(), b.1.to_bits()), "x = {x:e}");
        }
        assert!(t.eval(f64::NAN).is_nan());
    }

    #[test]
    fn a_locus_serves_a_table_on_the_same_abscissae() {
        let xs: [f64; 12] = [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
        let t = Table1D::new(xs.iter().map(|&x| (x, 1.0 + x)).collect()).unwrap();
        let u = Table1D::new(xs.iter().map(|&x| (x, (3.0 * x).cos())).collect()).unwrap();
        let shifted = Table1D::new(xs.iter().map(|&x| (x + 1e-3, 0.0)).collect()).unwrap();
        assert!(t.same_abscissae(&u) && !t.same_abscissae(&shifted));
        assert!(!t.same_abscissae(&Table1D::constant(1.0)));
        for k in 0..=1300 {
            let x = -0.1 + 1.2 * k as f64 / 1300.0;
            let (a, b) = (u.at(t.locate(x), x), u.eval_with_slope(x));
            assert_eq!((a.0.to_bits(), a.1.to_bits()), (b.0.to_bits(), b.1.to_bits()), "x = {x:e}");
        }
        assert_eq!(t.locate(-1.0), Locus::First);
        assert_eq!(t.locate(1.0), Locus::Last);
        assert_eq!(t.locate(0.15), Locus::Before(3));
    }

    #[test]
    fn interpolates_and_holds() {
        let t = Table1D::new(vec![(0.0, 0.5), (1.0, 1.0)]).unwrap();
        assert_eq!(t.eval(-1.0), 0.5);
        assert_eq!(t.eval(0.5), 0.75);
        assert_eq!(t.eval_with_slope(0.5).1, 0.5);
        assert_eq!(t.eval(3.0), 1.0);
    }
}
