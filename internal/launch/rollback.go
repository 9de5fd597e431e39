package launch

// rollback is what a launch in progress made and must unmake if it ends
// refused. Each step that makes something (a slot, an attempt's
// commitment, a record, a known launch) pushes the step that unmakes it,
// and one deferred unwind runs them, last pushed first, unless the launch
// committed what they would undo. An undo step is given the refusal it
// undoes for, so that the step that settles the attempt says in which
// state it left it.
type rollback struct {
	undo []func(*Refusal)
}

// push adds the step that unmakes what was just made.
func (rb *rollback) push(undo func(*Refusal)) { rb.undo = append(rb.undo, undo) }

// commit keeps everything made so far: its undo steps are dropped.
func (rb *rollback) commit() { rb.undo = nil }

// unwind undoes, last first, what was made when *ref is a refusal, and
// nothing otherwise. It is meant to be deferred with the address of the
// refusal being returned.
func (rb *rollback) unwind(ref **Refusal) {
	if *ref == nil {
		return
	}
	for i := len(rb.undo) - 1; i >= 0; i-- {
		rb.undo[i](*ref)
	}
	rb.undo = nil
}
