#!/bin/sh
# comment before the directives
#SBATCH -n4 -G8 -t30 -d afterok:12:13,afternotok:14
#SBATCH --mem-per-cpu 2G --cpus-per-task 2 --no-requeue
#SBATCH --qos=high --constraint="a100|h100" --export=ALL,FOO=bar
#SBATCH --job-name "quoted name" --chdir '/data/my dir' # trailing comment
  #SBATCH --time=10
echo hi
