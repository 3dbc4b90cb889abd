//! Merging sorted lists of rule indices back into rule order.

/// Lists merged without touching the heap. Evaluation yields at most two
/// lists per matching hook bucket (exact, `*`, and each matching glob), so
/// more than this only happens with many overlapping hook globs.
const INLINE: usize = 8;

/// Yields the union of several ascending lists of rule indices, ascending.
///
/// The index hands out one list per bucket a hook falls into; merging them
/// lazily keeps "first match wins" exact while letting evaluation stop at
/// the first rule that applies, without collecting candidates first.
/// Each rule sits in exactly one list, so there are no duplicates to skip.
#[derive(Debug)]
pub(crate) struct Candidates<'a> {
    inline: [&'a [usize]; INLINE],
    len: usize,
    /// Only allocated past `INLINE` lists.
    spill: Vec<&'a [usize]>,
}

impl<'a> Candidates<'a> {
    /// An empty merge.
    pub(crate) fn new() -> Self {
        Self {
            inline: [&[]; INLINE],
            len: 0,
            spill: Vec::new(),
        }
    }

    /// Adds an ascending list to the merge.
    pub(crate) fn push(&mut self, list: &'a [usize]) {
        if list.is_empty() {
            return;
        }
        match self.inline.get_mut(self.len) {
            Some(slot) => {
                *slot = list;
                self.len += 1;
            }
            None => self.spill.push(list),
        }
    }
}

impl Iterator for Candidates<'_> {
    type Item = usize;

    /// Pops the smallest head; a linear scan beats a heap for a handful of
    /// lists.
    fn next(&mut self) -> Option<usize> {
        let mut best: Option<(usize, &mut &[usize])> = None;
        let lists = self.inline[..self.len]
            .iter_mut()
            .chain(self.spill.iter_mut());
        for list in lists {
            if let Some(&head) = list.first() {
                if best.as_ref().is_none_or(|(smallest, _)| head < *smallest) {
                    best = Some((head, list));
                }
            }
        }
        let (head, list) = best?;
        *list = list.get(1..).unwrap_or_default();
        Some(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_in_ascending_order() {
        let (a, b, c) = ([0, 4, 9], [1, 2, 10], [3]);
        let mut merge = Candidates::new();
        merge.push(&a);
        merge.push(&[]);
        merge.push(&b);
        merge.push(&c);
        assert_eq!(merge.collect::<Vec<_>>(), [0, 1, 2, 3, 4, 9, 10]);
    }

    #[test]
    fn spills_past_the_inline_capacity() {
        let lists: Vec<Vec<usize>> = (0..20).map(|i| vec![i, i + 20]).rev().collect();
        let mut merge = Candidates::new();
        for list in &lists {
            merge.push(list);
        }
        assert_eq!(merge.collect::<Vec<_>>(), (0..40).collect::<Vec<_>>());
    }

    #[test]
    fn empty_merge_yields_nothing() {
        assert_eq!(Candidates::new().next(), None);
    }
}
