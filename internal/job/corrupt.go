package job

// Values of the job table that do not decode, set aside at the agent's
// start so that one bad value keeps no job from starting.

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"roam/internal/migrate"
)

// Corrupt is a value of the table that did not decode.
type Corrupt struct {
	Bucket, Key string
	Err         string
}

// decoders check each bucket's values: they decode, and a job's record is
// under its own id.
var decoders = map[string]func(tx *bolt.Tx, key, v []byte) error{
	string(bucketHome): checkRecord,
	string(bucketLocal): func(_ *bolt.Tx, key, v []byte) error {
		return underItsID(key, v, func(l Local) string { return l.ID })
	},
	string(bucketOut): func(_ *bolt.Tx, _, v []byte) error { var r migrate.Record; return json.Unmarshal(v, &r) },
	string(bucketIn):  func(_ *bolt.Tx, _, v []byte) error { var r migrate.InRecord; return json.Unmarshal(v, &r) },
}

// underItsID checks that v decodes to a T whose id is its key.
func underItsID[T any](key, v []byte, id func(T) string) error {
	var x T
	if err := json.Unmarshal(v, &x); err != nil {
		return err
	}
	if id(x) != string(key) {
		return fmt.Errorf("record of job %q under key %q", id(x), key)
	}
	return nil
}

// SetAsideCorrupt moves every value that does not decode out of its
// bucket into corrupt/, and returns them: the agent starts with the rest,
// and the bytes stay for whoever looks into it.
func (s *Store) SetAsideCorrupt() ([]Corrupt, error) {
	var bad []Corrupt
	err := s.db.Update(func(tx *bolt.Tx) error {
		for name, check := range decoders {
			b := tx.Bucket([]byte(name))
			var keys [][]byte
			var vals [][]byte
			err := b.ForEach(func(k, v []byte) error {
				if err := check(tx, k, v); err != nil {
					bad = append(bad, Corrupt{Bucket: name, Key: string(k), Err: err.Error()})
					keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
				}
				return nil
			})
			if err != nil {
				return err
			}
			if len(keys) == 0 {
				continue
			}
			aside, err := tx.CreateBucketIfNotExists(bucketBad)
			if err != nil {
				return err
			}
			for i, k := range keys {
				if err := aside.Put(append([]byte(name+"/"), k...), vals[i]); err != nil {
					return err
				}
				if err := b.Delete(k); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return bad, nil
}
