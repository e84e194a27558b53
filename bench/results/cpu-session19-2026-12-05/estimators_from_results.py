import json,glob,math,statistics as st,sys
for d in sys.argv[1:]:
    new=[];old=[]
    for f in sorted(glob.glob(d+'/aa-*.json')):
        try: j=json.load(open(f))
        except Exception: continue
        p=j.get('paired') or {}
        if not p.get('configs'): continue
        new.append(p['ratio']); old.append(math.exp(sum(math.log(c['against_median_s']/c['median_s']) for c in p['configs'])/len(p['configs'])))
    f=lambda v: 'n=%d range %.4f..%.4f spread %.2f%% sd %.2f%%'%(len(v),min(v),max(v),(max(v)/min(v)-1)*100,st.stdev(v)*100)
    print(d); print('  pairs  ', f(new)); print('  medians', f(old))
