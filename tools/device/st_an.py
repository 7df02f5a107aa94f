import sys
rows=[l.split() for l in open(sys.argv[1])]
b=[int(r[0]) for r in rows]; e=[int(r[1]) for r in rows]; k=[r[2] for r in rows]
n=len(b)
gap=[0]+[b[i]-e[i-1] for i in range(1,n)]
# decode reps start with the first piece: a submit shorter than 100 us right after an 'r'
starts=[i for i in range(1,n) if k[i-1]=='r' and k[i]=='s' and e[i]-b[i] < 100_000]
print("submits", n, "decode starts", len(starts))
tot=[]
for a in starts[-6:]:
    # the rep ends at the 4th following r whose next gap > 300us (or the run end)
    z=a
    while z+1<n and not (k[z]=='r' and (z+1==n or gap[z+1]>300_000)): z+=1
    seg=range(a,z+1)
    g=[gap[i]/1e3 for i in seg][1:]
    print(f"rep {a}-{z}: {z-a+1} submits, GPU span {(e[z]-b[a])/1e3:.0f} us, gaps {sum(g):.0f} us, gaps>30us: {[(i,round(gap[i]/1e3)) for i in seg if i>a and gap[i]>30_000]}")
    print("   spans ms:", [round((e[i]-b[i])/1e6,2) for i in seg])
