import json,glob,math,statistics as st,sys
runs=[]
for f in sorted(glob.glob(sys.argv[1]+'/aa-*.json')):
    try: j=json.load(open(f))
    except Exception: continue
    p=j.get('paired',{})
    d=p.get('dump')
    if not d: continue
    e1=e2=e3=0
    for c in d:
        a,b=c['a'],c['b']
        e1+=math.log(st.median(b)/st.median(a))
        r=sorted(math.log(y/x) for x,y in zip(a,b))
        e2+=st.median(r)
        k=len(r)//4
        e3+=st.mean(r[k:len(r)-k])
    n=len(d)
    runs.append((math.exp(e1/n),math.exp(e2/n),math.exp(e3/n),p['ratio']))
print(len(runs),'runs')
for i,name in enumerate(['median(b)/median(a)','median of pair ratios','25%-trimmed mean of log pair ratios','reported']):
    x=[r[i] for r in runs]
    print('%-40s sd %.3f%%  range %.3f .. %.3f'%(name,100*st.stdev(x),min(x),max(x)))
