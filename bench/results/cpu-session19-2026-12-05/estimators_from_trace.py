import sys,re,statistics as st,math,glob
def runs(pattern):
    out=[]
    for f in sorted(glob.glob(pattern)):
        cfgs=[];cur=[]
        for line in open(f):
            m=re.search(r'pair (\S+) (\S+) (\d)',line)
            if m: cur.append((float(m.group(1)),float(m.group(2)),int(m.group(3))))
            elif 'order test' in line and cur: cfgs.append(cur);cur=[]
        if cfgs: out.append(cfgs)
    return out
R=runs(sys.argv[1])
def est_ratio_med(c): return st.median([b for a,b,_ in c])/st.median([a for a,b,_ in c])
def est_med_pair(c): return math.exp(st.median([math.log(b/a) for a,b,_ in c]))
def est_min(c): return min(b for a,b,_ in c)/min(a for a,b,_ in c)
def est_q25(c):
    A=sorted(a for a,b,_ in c);B=sorted(b for a,b,_ in c); k=len(A)//4
    return B[k]/A[k]
def est_hl(c):
    l=[math.log(b/a) for a,b,_ in c]; w=[(l[i]+l[j])/2 for i in range(len(l)) for j in range(i,len(l))]
    return math.exp(st.median(w))
def est_trim(c):
    l=sorted(math.log(b/a) for a,b,_ in c); k=len(l)//4; t=l[k:len(l)-k]; return math.exp(sum(t)/len(t))
for name,f in [('ratio of medians',est_ratio_med),('median pair ratio',est_med_pair),('HL pair',est_hl),('trim25 pair',est_trim),('q25 ratio',est_q25),('min ratio',est_min)]:
    agg=[math.exp(sum(math.log(f(c)) for c in run)/len(run)) for run in R]
    print('%-18s n=%d  %s  spread %.2f%%  sd %.2f%%'%(name,len(agg),' '.join('%.3f'%x for x in agg),(max(agg)/min(agg)-1)*100, st.stdev(agg)*100))
