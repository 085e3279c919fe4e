//! File names for series and charts that never merge two names: a name a
//! plugin chose may hold any character, and replacing the awkward ones by `_`
//! (as a plain sanitizer does) would let `a/b` and `a_b` overwrite each
//! other's file.

use std::collections::HashSet;

/// Above this, the encoded name is cut and a hash of the whole name added.
const MAX_STEM: usize = 120;

/// `name` as a file-name stem, injectively: ASCII letters, digits and
/// `-_=.` stay (a leading `.` does not, so no hidden file and no `..`),
/// every other byte becomes `~HH`. A stem longer than 120 bytes keeps its
/// first 100 and a 64-bit hash of the whole name.
pub fn file_stem(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, b) in name.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b"-_=".contains(&b) || (b == b'.' && i > 0);
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("~{b:02X}"));
        }
    }
    if out.is_empty() {
        // Not an escape (those have two hex digits), so distinct from all.
        return "~".to_string();
    }
    if out.len() > MAX_STEM {
        out.truncate(100);
        out.push_str(&format!("~{:016x}", fnv1a(name.as_bytes())));
    }
    out
}

/// Stems handed out for one folder: a stem asked for again (the same name
/// twice, e.g. with other labels) gets `~2`, then `~3`; every stem handed
/// out is in the set, so none is handed out twice.
#[derive(Debug, Default)]
pub struct Taken(HashSet<String>);

impl Taken {
    pub fn claim(&mut self, stem: String) -> String {
        if self.0.insert(stem.clone()) {
            return stem;
        }
        (2..)
            .map(|n| format!("{stem}~{n}"))
            .find(|s| self.0.insert(s.clone()))
            .unwrap_or(stem)
    }
}

/// The file names of a stage's series, in order: `series-STEM.json`, no
/// two alike (the same name twice gets `~2`).
pub fn series_files<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut taken = Taken::default();
    names
        .into_iter()
        .map(|n| format!("series-{}.json", taken.claim(file_stem(n))))
        .collect()
}

/// FNV-1a, 64 bits: a stable hash (the same in every build, unlike std's).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_names_give_distinct_stems() {
        let names = [
            "a/b", "a_b", "a b", "a~b", "a~2Fb", "", "~", ".", "..", "x.", "<&\"'>", "µs", "a\0b",
        ];
        let stems: HashSet<_> = names.iter().map(|n| file_stem(n)).collect();
        assert_eq!(stems.len(), names.len(), "{stems:?}");
        assert_eq!(file_stem("cur_bandwidth"), "cur_bandwidth");
        assert_eq!(file_stem("a/b"), "a~2Fb");
        assert_eq!(file_stem(".."), "~2E.");
        for s in &stems {
            assert!(!s.contains('/') && !s.starts_with('.') && !s.is_empty());
        }
    }

    #[test]
    fn long_names_are_cut_but_stay_apart() {
        let a = "x".repeat(300);
        let b = format!("{}y", "x".repeat(299));
        assert_ne!(file_stem(&a), file_stem(&b));
        assert!(file_stem(&a).len() <= MAX_STEM);
    }

    #[test]
    fn series_files_never_share_a_name() {
        // A sanitizer replacing `/` and ` ` by `_` gave all of these one file.
        assert_eq!(
            series_files(["a/b", "a_b", "a b", "bw", "bw"]),
            [
                "series-a~2Fb.json",
                "series-a_b.json",
                "series-a~20b.json",
                "series-bw.json",
                "series-bw~2.json"
            ]
        );
    }

    #[test]
    fn a_stem_claimed_twice_gets_a_suffix() {
        let mut taken = Taken::default();
        assert_eq!(taken.claim("bw".into()), "bw");
        assert_eq!(taken.claim("bw".into()), "bw~2");
        assert_eq!(taken.claim("bw".into()), "bw~3");
    }
}
