# Triage's check on a committed reference, from its exports (results/NAME/export/): each
# student's capacity-gap optimum in teacher loss (as fitted, so in-sample), teachers ranked by
# the distance of their bits per byte from it, Spearman's rho against the mean gain, and a 95 %
# interval from resampling seeds. Usage: python3 benches/triage_references.py NAME
import csv, json, sys, math, random, collections
csv.field_size_limit(10**9)
name=sys.argv[1]
fits=list(csv.DictReader(open(f'results/{name}/export/fits.csv')))
runs=list(csv.DictReader(open(f'results/{name}/export/runs.csv')))
gaps={}
for f in fits:
    if f['scope']=='capacity_gap': gaps[f['key']]=json.loads(f['result_json'])
teach={r['id']:r for r in runs if r['kind']=='teacher' and r['state']=='done'}
def spearman(x,y):
    def rk(v):
        o=sorted(range(len(v)),key=lambda i:v[i]); r=[0]*len(v); i=0
        while i<len(o):
            j=i
            while j+1<len(o) and v[o[j+1]]==v[o[i]]: j+=1
            for k in o[i:j+1]: r[k]=(i+j)/2+1
            i=j+1
        return r
    a,b=rk(x),rk(y); n=len(a); ma=sum(a)/n; mb=sum(b)/n
    c=sum((p-ma)*(q-mb) for p,q in zip(a,b)); va=sum((p-ma)**2 for p in a); vb=sum((q-mb)**2 for q in b)
    return c/math.sqrt(va*vb) if va*vb>0 else float('nan')
optima={k:(g['student_params'],g['student_tokens'],g['config'],g['by_teacher_loss']['optimum']) for k,g in gaps.items()}
for key,g in gaps.items():
    opt=g['by_teacher_loss']['optimum']
    others=[o[3]['at'] for k2,o in optima.items() if k2!=key and o[1]==g['student_tokens'] and o[2]==g['config'] and o[3].get('kind')=='interior']
    S=g['student_params']; D=g['student_tokens']
    if opt.get('kind')!='interior': print(f"S={S:.0f} D={D:.0f}: {opt.get('kind')}"); continue
    at=opt['at']; ci=opt['ci']
    cross='cross=' in g['config']
    studs=[r for r in runs if r['kind']=='student' and float(r['params_non_embedding'])==S and float(r['tokens'])==D and r['gain']
           and (r['distill']=='GOLD across' if cross else r['distill']!='GOLD across')]
    by=collections.defaultdict(dict)
    for s in studs: by[s['teacher_id']][int(s['seed'])]=float(s['gain'])
    tids=[t for t in by if t in teach]
    seeds=sorted({sd for t in tids for sd in by[t]})
    if len(tids)<3: print(f"S={S:.0f} D={D:.0f}: {len(tids)} teachers with gains"); continue
    k=float(studs[0]['val_loss'])/float(studs[0]['val_bpb'])
    dist={t:abs(float(teach[t]['val_bpb'])-at/k) for t in tids}
    def rho(w):
        xs=[];ys=[]
        for t in tids:
            ws=sum(w.get(sd,0) for sd in by[t])
            if ws==0: continue
            xs.append(-dist[t]); ys.append(sum(w.get(sd,0)*v for sd,v in by[t].items())/ws)
        return spearman(xs,ys)
    r0=rho({s:1 for s in seeds})
    if others:
        loo=sum(others)/len(others)
        dist_in=dist
        dist={t:abs(float(teach[t]['val_bpb'])-loo/k) for t in tids}
        r_loo=rho({s:1 for s in seeds})
        dist=dist_in
    else:
        loo=r_loo=None
    rnd=random.Random(1); draws=[]
    for i in range(1000):
        c=collections.Counter(rnd.choice(seeds) for _ in seeds); d=rho(dict(c))
        if d==d: draws.append(d)
    draws.sort()
    print(f"S={S:.0f} D={D:.0f}{' (across tokenizers)' if cross else ''}: L_T*={at:.4f} [{ci[0]:.4f}, {ci[1]:.4f}]; {len(tids)} teachers, {len(seeds)} seeds; rho {r0:.2f} [{draws[int(.025*len(draws))]:.2f}, {draws[int(.975*len(draws))-1]:.2f}]" + (f"; target from the other students ({loo:.4f}): rho {r_loo:.2f}" if loo else ""))
