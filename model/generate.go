package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// rankedDistricts is how many districts the generated rankings cover: the
// real dashboard ranks about 130, and a ranking of thousands of synthetic
// districts would not fit the 1 MiB root document beside their manifest.
const rankedDistricts = 132

// Generate returns a realistic, valid synthetic snapshot for date with n
// districts, the same for the same seed. District ids are "1".."130", "F",
// "U" (the real dashboard's), then "131", "132", …; each district document is
// 2–20 KB: membership, clubs, education, goals, ranking, and raw dashboard
// rows with the real column names ("Mem. Base", "% Club Growth", …).
func Generate(date string, n int, seed int64) *Snapshot {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	day, err := time.Parse(time.DateOnly, date)
	if err != nil {
		day = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	fetched := day.Add(30*time.Hour + 17*time.Minute).Format("2006-01-02T15:04:05.000Z")
	ids := GeneratedDistrictIDs(n)
	s := &Snapshot{
		SnapshotID:         strconv.FormatInt(day.Add(31*time.Hour).UnixMilli(), 10),
		CreatedAt:          day.Add(31 * time.Hour).Format("2006-01-02T15:04:05.000Z"),
		SchemaVersion:      "1.0.0",
		CalculationVersion: "2.1.0",
		Status:             "success",
		Errors:             []string{},
		Payload: Payload{
			Districts: make([]DistrictStatistics, n),
			Metadata: PayloadMetadata{
				Source:               "toastmasters-dashboard",
				FetchedAt:            fetched,
				DataAsOfDate:         date,
				DistrictCount:        int64(n),
				ProcessingDurationMs: int64(20000 + r.IntN(200000)),
				IsClosingPeriodData:  new(bool),
				CollectionDate:       day.AddDate(0, 0, 1).Format(time.DateOnly),
			},
		},
	}
	for i, id := range ids {
		s.Payload.Districts[i] = DistrictStatistics{DistrictID: id, AsOfDate: date, data: district(r, id, date)}
	}
	ranks := make([]any, 0, min(n, rankedDistricts))
	for i, id := range ids[:min(n, rankedDistricts)] {
		ranks = append(ranks, Object{
			"districtId":           id,
			"districtName":         "District " + id,
			"region":               "Region " + strconv.Itoa(1+i%14),
			"paidClubs":            int64(40 + r.IntN(200)),
			"paidClubBase":         int64(40 + r.IntN(200)),
			"clubGrowthPercent":    pct(r, -10, 15),
			"totalPayments":        int64(1000 + r.IntN(9000)),
			"paymentGrowthPercent": pct(r, -10, 15),
			"distinguishedClubs":   int64(r.IntN(120)),
			"clubsRank":            int64(i + 1),
			"paymentsRank":         int64(1 + r.IntN(n)),
			"distinguishedRank":    int64(1 + r.IntN(n)),
			"aggregateScore":       round2(r.Float64() * 400),
		})
	}
	s.Rankings = Object{
		"metadata": Object{
			"sourceCsvDate":      date,
			"calculatedAt":       fetched,
			"schemaVersion":      "1.0.0",
			"calculationVersion": "2.1.0",
			"rankingVersion":     "borda-2",
			"snapshotId":         date,
			"totalDistricts":     int64(len(ranks)),
			"fromCache":          false,
		},
		"rankings": ranks,
	}
	return s
}

// GeneratedDistrictIDs returns the first n district ids Generate uses.
func GeneratedDistrictIDs(n int) []string {
	ids := make([]string, 0, n)
	for i := 1; i <= 130 && len(ids) < n; i++ {
		ids = append(ids, strconv.Itoa(i))
	}
	for _, id := range []string{"F", "U"} {
		if len(ids) < n {
			ids = append(ids, id)
		}
	}
	for i := 131; len(ids) < n; i++ {
		ids = append(ids, strconv.Itoa(i))
	}
	return ids
}

var clubWords = []string{"Sunrise", "Speakers", "Café", "Orators", "Toasters", "Harbour", "Tech", "Leaders",
	"Evening", "Voices", "Gavel", "Summit", "Riverside", "Métro", "Pioneers", "Lunchtime"}

func district(r *rand.Rand, id, date string) Object {
	nClubs := 3 + r.IntN(42)
	byClub := make([]any, nClubs)
	clubRows := make([]any, nClubs)
	total := int64(0)
	for c := range nClubs {
		num := fmt.Sprintf("%08d", 1000+r.IntN(9000000))
		name := clubWords[r.IntN(len(clubWords))] + " " + clubWords[r.IntN(len(clubWords))]
		members := int64(4 + r.IntN(40))
		total += members
		byClub[c] = Object{"clubId": num, "clubName": name, "memberCount": members}
		status := any("Active")
		if r.IntN(10) == 0 {
			status = nil
		}
		clubRows[c] = Object{
			"Club Number":    num,
			"Club Name":      name,
			"Division":       string(rune('A' + c%6)),
			"Area":           strconv.Itoa(1 + c%9),
			"Mem. Base":      members - int64(r.IntN(5)),
			"Active Members": members,
			"Goals Met":      int64(r.IntN(11)),
			"Level 1s":       int64(r.IntN(6)),
			"Level 2s":       int64(r.IntN(4)),
			"Add. Level 2s":  int64(r.IntN(3)),
			"Level 3s":       int64(r.IntN(3)),
			"Level 4s, Path Completions, or DTM Award": int64(r.IntN(2)),
			"New Members":               int64(r.IntN(8)),
			"Club Status":               status,
			"Club Distinguished Status": []string{"", "D", "S", "P"}[r.IntN(4)],
			"% Club Growth":             pct(r, -30, 40),
		}
	}
	divisions := make([]any, 0, 6)
	for d := range 1 + nClubs/8 {
		divisions = append(divisions, Object{
			"Division":            string(rune('A' + d)),
			"Club Base":           int64(5 + r.IntN(10)),
			"Paid Clubs":          int64(5 + r.IntN(10)),
			"Distinguished Clubs": int64(r.IntN(8)),
			"Division Status":     []any{"Distinguished", "Select Distinguished", nil}[r.IntN(3)],
			"% Paid Club Growth":  pct(r, -20, 20),
		})
	}
	change := int64(r.IntN(400)) - 150
	active := int64(nClubs - r.IntN(3))
	byType := []any{}
	for _, t := range []string{"Level 1", "Level 2", "Level 3", "Level 4", "Level 5", "DTM"} {
		byType = append(byType, Object{"type": t, "count": int64(r.IntN(200))})
	}
	return Object{
		"districtId": id,
		"asOfDate":   date,
		"membership": Object{
			"total":         total,
			"change":        change,
			"changePercent": round2(float64(change) * 100 / float64(max(total, 1))),
			"byClub":        byClub,
			"new":           int64(r.IntN(300)),
			"renewed":       int64(r.IntN(2000)),
			"dual":          int64(r.IntN(50)),
		},
		"clubs": Object{
			"total":         int64(nClubs),
			"active":        active,
			"suspended":     int64(nClubs) - active,
			"ineligible":    int64(r.IntN(3)),
			"low":           int64(r.IntN(5)),
			"distinguished": int64(r.IntN(nClubs + 1)),
			"chartered":     int64(r.IntN(4)),
		},
		"education": Object{
			"totalAwards": int64(r.IntN(900)),
			"byType":      byType,
			"topClubs":    byClub[:min(3, nClubs)],
		},
		"goals": Object{
			"clubsGoal":         int64(nClubs + 5),
			"membershipGoal":    total + 100,
			"distinguishedGoal": int64(nClubs / 2),
		},
		"ranking": Object{
			"clubsRank":      int64(1 + r.IntN(130)),
			"paymentsRank":   int64(1 + r.IntN(130)),
			"aggregateScore": round2(r.Float64() * 400),
			"overallRank":    int64(1 + r.IntN(130)),
		},
		"districtPerformance": []any{Object{
			"District":                       id,
			"Paid Club Base":                 int64(nClubs),
			"Paid Clubs":                     active,
			"% Club Growth":                  pct(r, -10, 15),
			"Total YTD Payments":             int64(1000 + r.IntN(9000)),
			"Payment Base":                   int64(1000 + r.IntN(9000)),
			"% Payment Growth":               pct(r, -10, 15),
			"Mem. Base":                      total - change,
			"Active Clubs":                   active,
			"Total Distinguished Clubs":      int64(r.IntN(nClubs + 1)),
			"Select Distinguished Clubs":     int64(r.IntN(5)),
			"Presidents Distinguished Clubs": int64(r.IntN(5)),
			"Distinguished Status":           nil,
		}},
		"divisionPerformance": divisions,
		"clubPerformance":     clubRows,
	}
}

// pct is a percentage with two decimals between lo and hi.
func pct(r *rand.Rand, lo, hi float64) float64 { return round2(lo + r.Float64()*(hi-lo)) }

func round2(f float64) float64 { return math.Round(f*100) / 100 }
