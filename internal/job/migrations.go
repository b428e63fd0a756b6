package job

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"roam/internal/migrate"
)

// The migration ledger: each side's record of the migrations in flight,
// written before the side acts on it (see package migrate), so that an
// agent that restarts finishes them.

// PutOut writes a source's migration record.
func (s *Store) PutOut(r migrate.Record) error {
	return s.db.Update(func(tx *bolt.Tx) error { return put(tx, bucketOut, r.MID, r) })
}

// PutIn writes a destination's migration record.
func (s *Store) PutIn(r migrate.InRecord) error {
	return s.db.Update(func(tx *bolt.Tx) error { return put(tx, bucketIn, r.MID, r) })
}

// Out returns the source's record of migration mid.
func (s *Store) Out(mid string) (migrate.Record, bool, error) {
	return get[migrate.Record](s, bucketOut, mid)
}

// In returns the destination's record of migration mid.
func (s *Store) In(mid string) (migrate.InRecord, bool, error) {
	return get[migrate.InRecord](s, bucketIn, mid)
}

func get[T any](s *Store, bucket []byte, key string) (T, bool, error) {
	var x T
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket).Get([]byte(key))
		if b == nil {
			return nil
		}
		found = true
		if err := json.Unmarshal(b, &x); err != nil {
			return fmt.Errorf("job store: %s/%s: %w", bucket, key, err)
		}
		return nil
	})
	return x, found, err
}

// Outs returns every source record; Ins every destination record.
func (s *Store) Outs() ([]migrate.Record, error)  { return all[migrate.Record](s, bucketOut) }
func (s *Store) Ins() ([]migrate.InRecord, error) { return all[migrate.InRecord](s, bucketIn) }

// DeleteOut and DeleteIn forget records past their retention.
func (s *Store) DeleteOut(mid string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketOut).Delete([]byte(mid)) })
}

func (s *Store) DeleteIn(mid string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketIn).Delete([]byte(mid)) })
}
