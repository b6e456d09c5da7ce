// Package groupcommit is the group commit of the embedded stores
// (ownership/dirstore, ownership/sqlitestore): their queue of writes
// waiting to commit, and how it turns them into batches.
//
// Group commit. A write (a Put or a Delete) that finds no batch running
// commits alone, on its caller's goroutine. Otherwise it queues: when the
// running batch ends, a committer goroutine (gone again once the queue is
// empty) takes the queued writes as the next batch (Next: the oldest
// write, every small one, then bigger ones while the batch stays within
// a bound). Nothing waits for a batch to fill, so a lone write is a batch
// of one, while under load one sync serves every write that queued during
// the one before. How a batch commits is the store's: under its write
// lock, it claims each write before acting on it, sets each claimed
// write's answer, and only then are the batch's writes answered.
//
// A caller whose context ends while its write is queued abandons the
// write, if no batch has claimed it yet: it is answered at once, with
// nothing written, and no batch writes it later. Once claimed, a write
// runs to completion whatever its caller's context does.
package groupcommit
