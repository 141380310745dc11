import hashlib, math, random, sys
random.seed(7)
n = int(sys.argv[1])
words = ['w%d%s' % (k, hashlib.md5(str(k).encode()).hexdigest()[:3]) for k in range(1, 5001)]
out = sys.stdout
for i in range(1, n + 1):
    m = 20 + (i % 181)
    body = ' '.join(words[min(4999, int(math.exp(random.random() * math.log(5000))) - 1)] for _ in range(m))
    out.write('%d\t%s\n' % (1 + i % 100, body))
