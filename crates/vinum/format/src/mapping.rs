//! Plex address mapping as gvinum does it: from a byte offset in a plex to a subdisk and a
//! byte offset in that subdisk (`gv_plex_offset` in `geom_vinum_plex.c`, `gv_raid5_offset`
//! in `geom_vinum_raid5.c`). The drive byte is then the subdisk's drive offset plus that.
//!
//! Subdisks are columns in plex-offset order (the kernel keeps a plex's list sorted so).
//! With n columns and stripe size S:
//!
//! - concat: the subdisk whose [plex offset, plex offset + length) holds the offset.
//! - striped: unit u = offset / S goes to column u mod n at (u / n) · S + offset mod S.
//! - raid5: row r = offset / (S · (n − 1)) has its parity on column (n − 1) − (r mod n), so
//!   parity starts on the last column and moves one left per row; the row's data units k =
//!   0 … n − 2 go to column k, or k + 1 from the parity column on, at r · S + offset mod S.
//!   This is Linux md's left-asymmetric layout.
//!
//! A striped or raid5 plex's subdisks must be equally long; the kernel uses the first
//! subdisk's length trimmed to whole stripes (`gv_plex_size`, `gv_update_plex_config`).

use thiserror::Error;

use crate::objects::{PlexOrganization, VinumConfig};

/// One subdisk as a column of a plex.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Column {
    /// The subdisk's name.
    pub subdisk: String,
    /// The drive it lives on.
    pub drive: String,
    /// Where it starts on the drive.
    pub drive_offset: u64,
    /// Its length in bytes.
    pub length: u64,
    /// Its plex offset (concat: where it starts in the plex; otherwise only its rank counts).
    pub plex_offset: u64,
}

/// Where a plex byte lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Location {
    /// Index of the column (subdisk) in plex-offset order.
    pub column: usize,
    /// Byte offset within that subdisk.
    pub offset: u64,
    /// Bytes from here that continue in the same subdisk: to the end of the stripe unit
    /// (striped, raid5) or of the subdisk (concat).
    pub run: u64,
}

/// Where a raid5 plex byte lives and which column holds the parity of its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Raid5Location {
    /// The data byte.
    pub data: Location,
    /// The column holding the parity of the row; its parity unit is at the same subdisk
    /// offset as the data.
    pub parity_column: usize,
}

/// Why a plex cannot be mapped or an offset has no place in it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MappingError {
    /// No plex of that name in the configuration.
    #[error("no plex named {plex:?}")]
    UnknownPlex { plex: String },
    /// Fewer subdisks than the organization needs (the kernel keeps such a plex down).
    #[error("{organization} plex {plex:?} has {found} subdisks; mapping needs at least {needed}")]
    TooFewSubdisks { plex: String, organization: PlexOrganization, found: usize, needed: usize },
    /// A striped or raid5 plex with stripe size 0.
    #[error("plex {plex:?} has stripe size 0")]
    ZeroStripeSize { plex: String },
    /// Subdisks of a striped or raid5 plex differ in length (the kernel keeps it down).
    #[error("sd {subdisk:?} of plex {plex:?} is {length} bytes; column 0 is {expected}")]
    LengthMismatch { plex: String, subdisk: String, length: u64, expected: u64 },
    /// The offset is at or past the plex's end.
    #[error("plex offset {offset} is past the end of plex {plex:?} ({size} bytes)")]
    BeyondPlex { plex: String, offset: u64, size: u64 },
    /// A concat offset that no subdisk covers.
    #[error("no subdisk of concat plex {plex:?} covers plex offset {offset}")]
    Hole { plex: String, offset: u64 },
    /// A plex whose size does not fit 64 bits (only a corrupt configuration has one).
    #[error("plex {plex:?} is larger than 2^64 bytes")]
    TooLarge { plex: String },
    /// Asked for raid5 parity of a plex that is not raid5.
    #[error("plex {plex:?} is {organization}, not raid5")]
    NotRaid5 { plex: String, organization: PlexOrganization },
}

/// A plex's geometry, ready to map offsets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlexLayout {
    name: String,
    organization: PlexOrganization,
    columns: Vec<Column>,
    /// For striped and raid5: each column's usable length (whole stripes).
    column_length: u64,
}

impl PlexLayout {
    /// The layout of the named plex in `config`.
    pub fn from_config(config: &VinumConfig, plex: &str) -> Result<Self, MappingError> {
        let p = config.plex(plex).ok_or_else(|| MappingError::UnknownPlex { plex: plex.to_string() })?;
        let columns = config
            .subdisks_of(plex)
            .into_iter()
            .map(|s| Column {
                subdisk: s.name.clone(),
                drive: s.drive.clone(),
                drive_offset: s.drive_offset,
                length: s.length,
                plex_offset: s.membership.as_ref().map_or(0, |m| m.plex_offset),
            })
            .collect();
        Self::new(plex, p.organization, columns)
    }

    /// A layout from its parts; `columns` are sorted by plex offset here.
    pub fn new(name: &str, organization: PlexOrganization, mut columns: Vec<Column>) -> Result<Self, MappingError> {
        columns.sort_by_key(|c| c.plex_offset);
        let needed = organization.minimum_subdisks();
        if columns.len() < needed {
            return Err(MappingError::TooFewSubdisks {
                plex: name.to_string(),
                organization,
                found: columns.len(),
                needed,
            });
        }
        let mut column_length = 0;
        if let Some(stripe_size) = organization.stripe_size() {
            if stripe_size == 0 {
                return Err(MappingError::ZeroStripeSize { plex: name.to_string() });
            }
            let expected = columns[0].length;
            if let Some(c) = columns.iter().find(|c| c.length != expected) {
                return Err(MappingError::LengthMismatch {
                    plex: name.to_string(),
                    subdisk: c.subdisk.clone(),
                    length: c.length,
                    expected,
                });
            }
            column_length = expected - expected % stripe_size;
        }
        let n = columns.len() as u64;
        let fits = match organization {
            PlexOrganization::Concat => columns.iter().try_fold(0u64, |sum, c| sum.checked_add(c.length)).is_some(),
            PlexOrganization::Striped { stripe_size } | PlexOrganization::Raid5 { stripe_size } => {
                n.checked_mul(column_length).is_some() && n.checked_mul(stripe_size).is_some()
            }
        };
        if !fits {
            return Err(MappingError::TooLarge { plex: name.to_string() });
        }
        Ok(PlexLayout { name: name.to_string(), organization, columns, column_length })
    }

    /// The plex's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The plex's columns in plex-offset order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The plex's organization.
    pub fn organization(&self) -> PlexOrganization {
        self.organization
    }

    /// Bytes addressable in the plex: concat the sum of its subdisks, striped n × the column
    /// length, raid5 (n − 1) × the column length. [`PlexLayout::new`] refuses plexes whose
    /// size would not fit.
    pub fn size(&self) -> u64 {
        let n = self.columns.len() as u64;
        match self.organization {
            PlexOrganization::Concat => self.columns.iter().map(|c| c.length).sum(),
            PlexOrganization::Striped { .. } => n * self.column_length,
            PlexOrganization::Raid5 { .. } => (n - 1) * self.column_length,
        }
    }

    /// Where plex byte `offset` lives.
    pub fn locate(&self, offset: u64) -> Result<Location, MappingError> {
        let size = self.size();
        if offset >= size {
            return Err(MappingError::BeyondPlex { plex: self.name.clone(), offset, size });
        }
        let n = self.columns.len() as u64;
        match self.organization {
            PlexOrganization::Concat => {
                let (column, c) = self
                    .columns
                    .iter()
                    .enumerate()
                    .find(|(_, c)| c.plex_offset <= offset && offset - c.plex_offset < c.length)
                    .ok_or_else(|| MappingError::Hole { plex: self.name.clone(), offset })?;
                let within = offset - c.plex_offset;
                Ok(Location { column, offset: within, run: c.length - within })
            }
            PlexOrganization::Striped { stripe_size } => {
                let unit = offset / stripe_size;
                let within = offset % stripe_size;
                Ok(Location {
                    column: (unit % n) as usize,
                    offset: (unit / n) * stripe_size + within,
                    run: stripe_size - within,
                })
            }
            PlexOrganization::Raid5 { .. } => Ok(self.raid5_location(offset).data),
        }
    }

    /// The column holding the parity of raid5 row `row` (rows are `stripe size × (n − 1)`
    /// plex bytes, one stripe unit per column).
    pub fn parity_column(&self, row: u64) -> Result<usize, MappingError> {
        match self.organization {
            PlexOrganization::Raid5 { .. } => {
                let n = self.columns.len() as u64;
                Ok((n - 1 - row % n) as usize)
            }
            organization => Err(MappingError::NotRaid5 { plex: self.name.clone(), organization }),
        }
    }

    /// Where raid5 plex byte `offset` lives, and the parity column of its row.
    pub fn locate_raid5(&self, offset: u64) -> Result<Raid5Location, MappingError> {
        if let PlexOrganization::Raid5 { .. } = self.organization {
            let size = self.size();
            if offset >= size {
                return Err(MappingError::BeyondPlex { plex: self.name.clone(), offset, size });
            }
            Ok(self.raid5_location(offset))
        } else {
            Err(MappingError::NotRaid5 { plex: self.name.clone(), organization: self.organization })
        }
    }

    /// The drive byte of a location: the column's drive offset plus the offset in it
    /// (`None` past `u64::MAX` or for a column this plex does not have).
    pub fn drive_offset(&self, location: &Location) -> Option<u64> {
        self.columns.get(location.column)?.drive_offset.checked_add(location.offset)
    }

    fn raid5_location(&self, offset: u64) -> Raid5Location {
        let stripe_size = self.organization.stripe_size().expect("raid5 has a stripe size");
        let n = self.columns.len() as u64;
        let row_bytes = stripe_size * (n - 1);
        let row = offset / row_bytes;
        let parity = n - 1 - row % n;
        let in_row = offset % row_bytes;
        let data_unit = in_row / stripe_size;
        let column = if data_unit >= parity { data_unit + 1 } else { data_unit };
        let within = in_row % stripe_size;
        Raid5Location {
            data: Location { column: column as usize, offset: row * stripe_size + within, run: stripe_size - within },
            parity_column: parity as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(lengths: &[u64], plex_offsets: &[u64]) -> Vec<Column> {
        lengths
            .iter()
            .zip(plex_offsets)
            .enumerate()
            .map(|(i, (&length, &plex_offset))| Column {
                subdisk: format!("p.s{i}"),
                drive: format!("d{i}"),
                drive_offset: 135_680,
                length,
                plex_offset,
            })
            .collect()
    }

    fn raid5(n: usize, stripe: u64, length: u64) -> PlexLayout {
        let offsets: Vec<u64> = (0..n as u64).map(|i| i * stripe).collect();
        PlexLayout::new("p", PlexOrganization::Raid5 { stripe_size: stripe }, columns(&vec![length; n], &offsets))
            .unwrap()
    }

    #[test]
    fn raid5_worked_examples_from_gv_raid5_offset() {
        // n = 3, S = 64 KiB: a row is 128 KiB of data.
        //   psd = sdcount - 1 - (boff / (S * (n-1))) % n        parity column
        //   stripeoff = boff % (S * (n-1)); sd = stripeoff / S;  sd++ if sd >= psd
        //   real_off = (boff - stripeoff) / (n-1) + stripeoff % S
        // Row 0: psd = 2, data on 0, 1.  Row 1: psd = 1, data on 0, 2.  Row 2: psd = 0, data
        // on 1, 2.  Row 3 starts over with psd = 2.
        let k = 65_536u64;
        let layout = raid5(3, k, 16 * k);
        assert_eq!(layout.size(), 32 * k);
        let cases = [
            // (plex offset, data column, offset in sd, parity column)
            (0, 0, 0, 2),
            (k + 7, 1, 7, 2),
            (2 * k, 0, k, 1),
            (3 * k, 2, k, 1),
            (4 * k, 1, 2 * k, 0),
            (5 * k + 100, 2, 2 * k + 100, 0),
            (6 * k, 0, 3 * k, 2),
        ];
        for (offset, column, within, parity) in cases {
            let at = layout.locate_raid5(offset).unwrap();
            assert_eq!((at.data.column, at.data.offset, at.parity_column), (column, within, parity), "{offset}");
            assert_eq!(at.data.run, k - offset % k);
            assert_eq!(layout.locate(offset).unwrap(), at.data);
            assert_eq!(layout.parity_column(offset / (2 * k)).unwrap(), parity);
        }
        assert_eq!(layout.drive_offset(&layout.locate(4 * k).unwrap()), Some(135_680 + 2 * k));
    }

    #[test]
    fn raid5_is_left_asymmetric() {
        // Four columns: parity walks from the last column leftwards; data fills the other
        // columns in order, skipping the parity column (md's ALGORITHM_LEFT_ASYMMETRIC).
        let layout = raid5(4, 512, 512 * 8);
        let mut rows = Vec::new();
        for row in 0..4u64 {
            let mut line = ['?'; 4];
            line[layout.parity_column(row).unwrap()] = 'P';
            for unit in 0..3u64 {
                let at = layout.locate(row * 3 * 512 + unit * 512).unwrap();
                assert_eq!(at.offset, row * 512);
                line[at.column] = char::from(b'0' + unit as u8);
            }
            rows.push(line.iter().collect::<String>());
        }
        assert_eq!(rows, ["012P", "01P2", "0P12", "P012"]);
    }

    #[test]
    fn striped_worked_examples_from_gv_plex_offset() {
        // stripeno = boff / S; sdno = stripeno % n; real_off = (stripeno / n) * S + boff % S
        let s = 4096u64;
        let layout = PlexLayout::new(
            "p",
            PlexOrganization::Striped { stripe_size: s },
            columns(&[10 * s, 10 * s, 10 * s], &[0, s, 2 * s]),
        )
        .unwrap();
        assert_eq!(layout.size(), 30 * s);
        for (offset, column, within) in [(0, 0, 0), (s, 1, 0), (2 * s, 2, 0), (3 * s + 5, 0, s + 5), (8 * s, 2, 2 * s)]
        {
            let at = layout.locate(offset).unwrap();
            assert_eq!((at.column, at.offset), (column, within), "{offset}");
        }
        assert!(matches!(layout.locate_raid5(0), Err(MappingError::NotRaid5 { .. })));
    }

    #[test]
    fn concat_worked_examples() {
        let m = 1u64 << 20;
        let layout = PlexLayout::new("p", PlexOrganization::Concat, columns(&[2 * m, m], &[m * 2, 0])).unwrap();
        // Sorted by plex offset: column 0 is the 1 MiB subdisk at plex offset 0.
        assert_eq!(layout.columns()[0].length, m);
        assert_eq!(layout.locate(m / 2).unwrap(), Location { column: 0, offset: m / 2, run: m / 2 });
        assert_eq!(layout.locate(m).unwrap_err(), MappingError::Hole { plex: "p".into(), offset: m });
        assert_eq!(layout.locate(2 * m + 1).unwrap(), Location { column: 1, offset: 1, run: 2 * m - 1 });
        assert_eq!(layout.size(), 3 * m);
        assert!(matches!(layout.locate(3 * m), Err(MappingError::BeyondPlex { .. })));
    }

    #[test]
    fn every_byte_has_one_place_and_raid5_data_avoids_parity() {
        for n in 3..7usize {
            let stripe = 512u64;
            let layout = raid5(n, stripe, stripe * 5 + 100);
            assert_eq!(layout.size(), (n as u64 - 1) * stripe * 5, "lengths are trimmed to whole stripes");
            let mut seen = std::collections::HashSet::new();
            for unit in 0..layout.size() / stripe {
                let at = layout.locate_raid5(unit * stripe).unwrap();
                assert_ne!(at.data.column, at.parity_column);
                assert!(at.data.offset + stripe <= stripe * 5);
                assert!(seen.insert((at.data.column, at.data.offset)));
                let parity_row = at.data.offset / stripe;
                assert_eq!(layout.parity_column(parity_row).unwrap(), at.parity_column);
            }
            // Each row leaves exactly its parity unit unused.
            assert_eq!(seen.len() as u64, (n as u64 - 1) * 5);
        }
    }

    #[test]
    fn unmappable_plexes_are_refused() {
        let two = columns(&[1024, 1024], &[0, 512]);
        assert!(matches!(
            PlexLayout::new("p", PlexOrganization::Raid5 { stripe_size: 512 }, two.clone()),
            Err(MappingError::TooFewSubdisks { found: 2, needed: 3, .. })
        ));
        assert!(matches!(
            PlexLayout::new("p", PlexOrganization::Striped { stripe_size: 0 }, two),
            Err(MappingError::ZeroStripeSize { .. })
        ));
        assert!(matches!(
            PlexLayout::new("p", PlexOrganization::Striped { stripe_size: 512 }, columns(&[1024, 2048], &[0, 512])),
            Err(MappingError::LengthMismatch { length: 2048, expected: 1024, .. })
        ));
        assert!(matches!(
            PlexLayout::new("p", PlexOrganization::Concat, vec![]),
            Err(MappingError::TooFewSubdisks { found: 0, needed: 1, .. })
        ));
        let huge = 1u64 << 62;
        assert!(matches!(
            PlexLayout::new("p", PlexOrganization::Concat, columns(&[huge; 4], &[0, huge, 2 * huge, 3 * huge])),
            Err(MappingError::TooLarge { .. })
        ));
        assert!(matches!(
            PlexLayout::new("p", PlexOrganization::Raid5 { stripe_size: huge }, columns(&[huge; 5], &[0, 1, 2, 3, 4])),
            Err(MappingError::TooLarge { .. })
        ));
        assert_eq!(
            PlexLayout::from_config(&VinumConfig::default(), "nope"),
            Err(MappingError::UnknownPlex { plex: "nope".into() })
        );
    }
}
