package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Truncation deletes every record of an output up to its end, so it is
// only for a topic the stage alone owns. An output is refused for
// truncation, each reason named in the plan, when:
//
//   - it is one of the stage's input topics: deleting it deletes what the
//     rebuild was to read (BuildPlan sees this without the cluster);
//   - another consumer group has committed offsets on it: another
//     application reads it, and would lose what it has not read yet;
//   - a producer other than the stage's own transactional IDs is an active
//     producer of one of its partitions (DescribeProducers): someone else
//     writes to it, and the rebuild would not write their records again.
//
// ObserveOwners reads the last two before --execute, and the dry run, so
// the plan shows the refusals before anything changes. The broker keeps a
// producer's state while the partition holds its records, until
// producer.id.expiration.ms (a day by default) after its last write; a
// producer that is neither idempotent nor transactional leaves none and
// cannot be seen.

// Owners is who, besides the stage, reads or writes one output topic.
type Owners struct {
	// Groups are the other consumer groups with committed offsets on it.
	Groups []string `json:"groups,omitempty"`
	// Producers are the active producers of its partitions that are not
	// the stage's own transactional IDs.
	Producers []Producer `json:"producers,omitempty"`
	// Unknown says what could not be read: without it, truncation is
	// refused too.
	Unknown string `json:"unknown,omitempty"`
}

// Producer is a producer ID found writing to an output.
type Producer struct {
	ProducerID int64 `json:"producer_id"`
	// TransactionalID names it when it is transactional and the cluster
	// lists it (empty otherwise: an idempotent producer).
	TransactionalID string  `json:"transactional_id,omitempty"`
	Partitions      []int32 `json:"partitions"`
}

// ObserveOwners fills o.Owners for every existing output: the consumer
// groups other than the stage's own with offsets on it, and its active
// producers that are none of the stage's transactional IDs. It changes
// nothing.
func ObserveOwners(ctx context.Context, adm *kadm.Client, o *Observed) error {
	o.Owners = map[string]Owners{}
	var present []string
	for _, out := range o.Outputs {
		if out.Exists {
			present = append(present, out.Topic)
			o.Owners[out.Topic] = Owners{}
		}
	}
	if len(present) == 0 {
		return nil
	}
	if err := observeReaders(ctx, adm, o, present); err != nil {
		return err
	}
	return observeWriters(ctx, adm, o, present)
}

// observeReaders finds the other groups with committed offsets on the
// topics.
func observeReaders(ctx context.Context, adm *kadm.Client, o *Observed, topics []string) error {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("listing the consumer groups, to see who reads the outputs: %w", err)
	}
	var groups []string
	for _, g := range listed.Sorted() {
		// A share group's progress is no committed offset.
		if g.Group != o.ApplicationID && g.GroupType != "share" {
			groups = append(groups, g.Group)
		}
	}
	if len(groups) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, t := range topics {
		want[t] = true
	}
	fetched := adm.FetchManyOffsets(ctx, groups...)
	for _, g := range groups {
		r, ok := fetched[g]
		switch {
		case !ok || errors.Is(r.Err, kerr.GroupIDNotFound):
			continue
		case r.Err != nil:
			for _, t := range topics {
				own := o.Owners[t]
				own.Unknown = joinWhy(own.Unknown, fmt.Sprintf("the offsets of group %s could not be read (%v)", g, r.Err))
				o.Owners[t] = own
			}
			continue
		}
		reads := map[string]bool{}
		r.Fetched.Each(func(off kadm.OffsetResponse) {
			if off.Err == nil && off.At >= 0 && want[off.Topic] {
				reads[off.Topic] = true
			}
		})
		for t := range reads {
			own := o.Owners[t]
			own.Groups = append(own.Groups, g)
			o.Owners[t] = own
		}
	}
	return nil
}

// observeWriters finds the active producers of the topics' partitions
// that are none of the stage's transactional IDs.
func observeWriters(ctx context.Context, adm *kadm.Client, o *Observed, topics []string) error {
	ids := o.transactionalIDs()
	own := map[int64]bool{}
	if len(ids) > 0 {
		described, err := adm.DescribeTransactions(ctx, ids...)
		unauthorized := errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
		for _, d := range described {
			unauthorized = unauthorized || errors.Is(d.Err, kerr.TransactionalIDAuthorizationFailed)
		}
		if unauthorized {
			// Its own writes cannot be told from others': unknown, which
			// refuses the truncation, naming the ACL the replay needs
			// anyway (Write implies Describe; the fence step writes).
			why := fmt.Sprintf("the stage's transactional IDs could not be described to tell its own writes from others': not authorized (needs Write on transactional IDs prefixed %s-)", o.ApplicationID)
			for _, t := range topics {
				ow := o.Owners[t]
				ow.Unknown = joinWhy(ow.Unknown, why)
				o.Owners[t] = ow
			}
			return nil
		}
		if err != nil && described == nil {
			return fmt.Errorf("describing the stage's transactional IDs, to tell its own writes from others': %w", err)
		}
		for _, id := range ids {
			d, ok := described[id]
			switch {
			case !ok && err != nil:
				return fmt.Errorf("describing transactional ID %s: %w", id, err)
			case !ok, errors.Is(d.Err, kerr.TransactionalIDNotFound):
				// Never used: it wrote nothing.
			case d.Err != nil:
				return fmt.Errorf("describing transactional ID %s: %w", id, d.Err)
			default:
				own[d.ProducerID] = true
			}
		}
	}
	set := kadm.TopicsSet{}
	for _, out := range o.Outputs {
		if out.Exists {
			for p := range out.Partitions {
				set.Add(out.Topic, int32(p))
			}
		}
	}
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil && described == nil {
		return fmt.Errorf("describing the producers of the outputs: %w", err)
	}
	foreign := map[string]map[int64][]int32{}
	for _, t := range topics {
		for _, dp := range described[t].Partitions.Sorted() {
			if dp.Err != nil {
				ow := o.Owners[t]
				ow.Unknown = joinWhy(ow.Unknown, fmt.Sprintf("the producers of partition %d could not be described (%v)", dp.Partition, dp.Err))
				o.Owners[t] = ow
				continue
			}
			for _, p := range dp.ActiveProducers.Sorted() {
				if own[p.ProducerID] {
					continue
				}
				if foreign[t] == nil {
					foreign[t] = map[int64][]int32{}
				}
				foreign[t][p.ProducerID] = append(foreign[t][p.ProducerID], dp.Partition)
			}
		}
		if _, ok := described[t]; !ok && err != nil {
			ow := o.Owners[t]
			ow.Unknown = joinWhy(ow.Unknown, fmt.Sprintf("its producers could not be described (%v)", err))
			o.Owners[t] = ow
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	// Name the transactional ones (best effort: the list is only a name).
	names := map[int64]string{}
	if listed, err := adm.ListTransactions(ctx, nil, nil); err == nil || listed != nil {
		for _, lt := range listed {
			names[lt.ProducerID] = lt.TxnID
		}
	}
	for t, byID := range foreign {
		ow := o.Owners[t]
		for id, parts := range byID {
			ow.Producers = append(ow.Producers, Producer{ProducerID: id, TransactionalID: names[id], Partitions: parts})
		}
		sort.Slice(ow.Producers, func(i, j int) bool { return ow.Producers[i].ProducerID < ow.Producers[j].ProducerID })
		o.Owners[t] = ow
	}
	return nil
}

func joinWhy(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// truncateRefusal says why the output may not be truncated, or "".
func truncateRefusal(out Output, inputs []string, owners Owners) string {
	var why []string
	if slices.Contains(inputs, out.Topic) {
		why = append(why, "it is an input topic of the stage: truncating it deletes what the rebuild is to read")
	}
	if len(owners.Groups) > 0 {
		why = append(why, fmt.Sprintf("%s %s %s committed offsets on it: another application reads it",
			textfmt.PluralForm(len(owners.Groups), "group", "groups"), strings.Join(owners.Groups, ", "), textfmt.PluralForm(len(owners.Groups), "has", "have")))
	}
	if len(owners.Producers) > 0 {
		ps := make([]string, len(owners.Producers))
		for i, p := range owners.Producers {
			ps[i] = "producer ID " + strconv.FormatInt(p.ProducerID, 10)
			if p.TransactionalID != "" {
				ps[i] += " (transactional ID " + p.TransactionalID + ")"
			}
			ps[i] += " on " + textfmt.PluralForm(len(p.Partitions), "partition", "partitions") + " " + joinInts(p.Partitions)
		}
		why = append(why, fmt.Sprintf("%s that %s none of the stage's transactional IDs %s written to it: another producer writes it, and the rebuild would not write its records again",
			strings.Join(ps, ", "), textfmt.PluralForm(len(ps), "is", "are"), textfmt.PluralForm(len(ps), "has", "have")))
	}
	if owners.Unknown != "" {
		why = append(why, "who else reads or writes it is not known: "+owners.Unknown)
	}
	return strings.Join(why, "; and ")
}

// TruncateRefusal says why --truncate-outputs may not run: the outputs
// the stage does not alone own, each with its reasons, and what to do
// instead. Empty when every output to truncate is the stage's alone.
func (p *Plan) TruncateRefusal() string {
	var refused []string
	for _, o := range p.Outputs {
		if o.Refused != "" {
			refused = append(refused, o.Topic+": "+o.Refused)
		}
	}
	if len(refused) == 0 {
		return ""
	}
	return fmt.Sprintf("--truncate-outputs deletes only what this stage alone owns, and %s; give --keep-outputs (the rebuild appends), or point the stage file's output topics at new versioned topics, create them, replay, and move the readers over once the rebuild caught up",
		strings.Join(refused, "; "))
}
